"""WebShop: an HTTP client of a running WebShop server, and the environment built on it.

`WebShop <https://github.com/princeton-nlp/WebShop>`_ (Yao et al., 2022) is a simulated shop:
each goal is a shopping instruction, the agent searches, opens products, picks options and
clicks ``Buy Now``, and the server grades the purchase with a reward in [0, 1]. The paper
reports the mean reward ("score") and the share of rewards equal to 1 ("success rate").

Nothing of WebShop is bundled or re-implemented here: :class:`WebShopClient` talks to the
Flask app of WebShop's ``web_agent_site`` over HTTP, the way a browser does, and turns each page
into a compact text observation plus the actions it offers. :class:`WebShopEnvironment` gives the
interactor two tools over one episode per task, ``webshop_search`` and ``webshop_click``.

Start a server from a WebShop checkout (``./setup.sh -d small`` for the 1,000-product set, or
``-d all``), then ``python -m web_agent_site.app --log`` (it listens on port 3000), and pass
``base_url="http://127.0.0.1:3000"`` or set ``WEBSHOP_URL``. The first request after the server
starts loads the product catalogue, which can take minutes for the full set.

What this client assumes of ``web_agent_site`` (read from a stored copy of princeton-nlp/WebShop's
``app.py``, ``engine/engine.py``, ``envs/web_agent_text_env.py`` and ``templates/``; not yet run
against a live server):

- Routes (GET and POST both accepted): ``/<session_id>`` (the search page; a POST with form field
  ``search_query`` redirects to the results, the query lower-cased and split on spaces),
  ``/search_results/<session_id>/<keywords>/<page>``,
  ``/item_page/<session_id>/<asin>/<keywords>/<page>/<options>``,
  ``/item_sub_page/<session_id>/<asin>/<keywords>/<page>/<sub_page>/<options>`` and
  ``/done/<session_id>/<asin>/<options>``. ``keywords`` is the ``str()`` of a Python list and
  ``options`` the ``str()`` of a dict ``{option name: chosen value}``, URL-quoted.
- A session id containing ``fixed`` is bound to goal ``int(session_id.split("_")[-1])`` of the
  server's goal list (shuffled with seed 233), so ``fixed_<i>`` is goal ``i``; other ids draw a
  random goal. Goals 0-499 are the test split WebShop's baselines use, 500-1,499 the dev split.
- The instruction is the first ``h4`` of ``#instruction-text`` (``Instruction: <text>``; a second
  ``h4`` repeats the current query). Buttons are ``<form action=... method=post><button>``
  (``Back to Search``, ``< Prev``, ``Next >``, ``< Back to Results``, ``< Back to Item Page``,
  ``Description``, ``Features``, ``Reviews``, ``Attributes``, ``Buy Now``; ``engine.py`` names
  ``< Prev`` where the templates show ``< Back to ...``, so ``prev``/``back``/``next`` match any
  ``<``/``>`` button); products
  are ``<a class="product-link" href=...>ASIN</a>``; an option value is an
  ``<input type="radio" name=<option> value=<value> data-url=<item_page url>>`` with a ``<label>``
  (the client builds the ``item_page`` URL itself when ``data-url`` is missing).
- The done page holds the reward in the ``<pre>`` of ``#reward``, and the goal and purchase in a
  ``display:none`` block, which stays out of the observation.
- The server keeps no page state between requests (everything is in the URL), so the client
  follows the page's own links and can search from any page, as WebShop's text environment
  allows. Re-running a goal reuses its ``fixed_<i>`` session, which is harmless for that reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from genmem.envs.base import Environment, EnvTools, Outcome, Task
from genmem.envs.webshop_pages import (
    MAX_OBSERVATION_CHARS,
    Clickable,
    InvalidWebShopAction,
    WebShopError,
    WebShopPage,
    WebShopUnavailable,
    parse_page,
    url_segment,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_OBSERVATION_CHARS",
    "TEST_GOALS",
    "WEBSHOP_URL_ENV",
    "Clickable",
    "InvalidWebShopAction",
    "WebShopClickInput",
    "WebShopClient",
    "WebShopEnvironment",
    "WebShopError",
    "WebShopPage",
    "WebShopSearchInput",
    "WebShopUnavailable",
    "parse_page",
    "resolve_webshop_url",
]

WEBSHOP_URL_ENV = "WEBSHOP_URL"
"""Environment variable read when no server URL is passed."""
DEFAULT_TIMEOUT = 60.0
"""Seconds to wait for one page (search over the full catalogue is not instant)."""
TEST_GOALS = range(500)
"""Goal indices of WebShop's test split (what its baselines and ReAct evaluate on)."""

_START_HINT = (
    "start one from a WebShop checkout (github.com/princeton-nlp/WebShop): ./setup.sh -d small, "
    "then python -m web_agent_site.app --log (port 3000), and pass "
    f"base_url='http://127.0.0.1:3000' or set {WEBSHOP_URL_ENV}"
)


def resolve_webshop_url(base_url: str | None = None) -> str:
    """The server URL: ``base_url``, else ``$WEBSHOP_URL``; trailing slashes removed.

    Raises:
        WebShopUnavailable: neither is set, or the URL is not ``http(s)://...``.
    """
    url = (base_url or os.environ.get(WEBSHOP_URL_ENV) or "").strip()
    if not url:
        raise WebShopUnavailable(f"no WebShop server is configured; {_START_HINT}", url="")
    if not re.match(r"https?://", url):
        raise WebShopUnavailable(
            f"WebShop URL {url!r} must start with http:// or https://, e.g. http://127.0.0.1:3000",
            url=url,
        )
    return url.rstrip("/")


class WebShopClient:
    """One WebShop episode at a time over HTTP: reset to a goal, search, click, read the reward.

    Args:
        base_url: The server's root, e.g. ``http://127.0.0.1:3000`` (empty: ``$WEBSHOP_URL``).
        timeout: Seconds to wait for each page.
        client: An ``httpx.Client`` to send requests with (its owner closes it).

    Raises:
        WebShopUnavailable: no URL is given or set, or it is not ``http(s)://``.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        client: httpx.Client | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        self.base_url = resolve_webshop_url(base_url)
        self.timeout = timeout
        self._owns_client = client is None
        self._http = client if client is not None else httpx.Client(follow_redirects=True)
        self._page: WebShopPage | None = None
        self._session: str | None = None

    def __enter__(self) -> WebShopClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            self._http.close()

    @staticmethod
    def session_id(goal_index: int) -> str:
        """The session id WebShop binds to goal ``goal_index``."""
        return f"fixed_{goal_index}"

    @property
    def page(self) -> WebShopPage | None:
        """The page the episode is on (None before :meth:`reset`)."""
        return self._page

    @property
    def done(self) -> bool:
        """True once the episode's purchase is made."""
        return self._page is not None and self._page.done

    @property
    def reward(self) -> float | None:
        """The purchase's reward, or None while nothing was bought."""
        return self._page.reward if self._page is not None else None

    def instruction(self, goal_index: int) -> str:
        """The shopping instruction of goal ``goal_index`` (the episode is left as it is)."""
        page = self._open(goal_index)
        assert page.instruction is not None
        return page.instruction

    def reset(self, goal_index: int) -> WebShopPage:
        """Start an episode on goal ``goal_index``: its search page.

        Raises:
            WebShopUnavailable: the server does not answer, or not with a WebShop page.
            WebShopError: the server failed on this goal (an index past its goal list).
        """
        self._page = self._open(goal_index)
        self._session = self.session_id(goal_index)
        return self._page

    def search(self, query: str) -> WebShopPage:
        """Search for ``query`` (from any page, as WebShop's text environment allows)."""
        words = " ".join(query.split())
        session = self._live(f"search[{query}]")
        if not words:
            raise InvalidWebShopAction(
                "the search query is empty; give a few product keywords", action="search[]"
            )
        url = f"{self.base_url}/{url_segment(session)}"
        self._page = self._fetch("POST", url, data={"search_query": words})
        return self._page

    def click(self, target: str) -> WebShopPage:
        """Click the button, product (ASIN) or option value ``target`` on the current page.

        Raises:
            InvalidWebShopAction: no episode, the episode is over, or the page has no such thing.
            WebShopError: the server failed to serve the page the click leads to.
        """
        self._live(f"click[{target}]")
        assert self._page is not None
        clickable = self._page.find(target)
        assert clickable.url is not None
        self._page = self._fetch(clickable.method, clickable.url)
        return self._page

    def step(self, action: str) -> WebShopPage:
        """Take a text action ``search[<keywords>]`` or ``click[<label>]``."""
        m = re.fullmatch(r"\s*(search|click)\s*\[(.*)\]\s*", action, flags=re.DOTALL | re.I)
        if m is None:
            raise InvalidWebShopAction(
                f"{action!r} is not an action; write search[<keywords>] or click[<label>]",
                action=action,
            )
        verb, arg = m.group(1).lower(), m.group(2)
        return self.search(arg) if verb == "search" else self.click(arg)

    # -- internals

    def _live(self, action: str) -> str:
        if self._page is None or self._session is None:
            raise InvalidWebShopAction(
                "no WebShop episode is open; call reset(goal_index) first", action=action
            )
        if self._page.done:
            raise InvalidWebShopAction(
                f"the episode is over (product {self._page.asin} bought, reward "
                f"{self._page.reward}); reset to start another",
                action=action,
            )
        return self._session

    def _open(self, goal_index: int) -> WebShopPage:
        if isinstance(goal_index, bool) or not isinstance(goal_index, int) or goal_index < 0:
            raise ValueError(f"goal_index must be an int >= 0, got {goal_index!r}")
        url = f"{self.base_url}/{self.session_id(goal_index)}"
        try:
            page = self._fetch("GET", url)
        except WebShopUnavailable:
            raise
        except WebShopError as exc:
            if exc.status == 404:
                raise WebShopUnavailable(
                    f"{self.base_url} is not a WebShop server (HTTP 404 for {url}); {_START_HINT}",
                    url=self.base_url,
                ) from exc
            raise WebShopError(
                f"WebShop failed to open goal {goal_index} ({exc}); is the index past the "
                "server's goal list? See the server log",
                url=url,
            ) from exc
        if page.instruction is None:
            raise WebShopUnavailable(
                f"{url} answered a page without #instruction-text, so {self.base_url} is not a "
                f"WebShop web_agent_site server; {_START_HINT}",
                url=self.base_url,
            )
        return page

    def _fetch(self, method: str, url: str, data: Mapping[str, str] | None = None) -> WebShopPage:
        try:
            response = self._http.request(
                method, url, data=data, timeout=self.timeout, follow_redirects=True
            )
        except httpx.TimeoutException as exc:
            raise WebShopUnavailable(
                f"the WebShop server at {self.base_url} did not answer within {self.timeout}s "
                "(the first request after it starts loads the catalogue); retry or raise timeout",
                url=self.base_url,
            ) from exc
        except httpx.HTTPError as exc:
            raise WebShopUnavailable(
                f"cannot reach a WebShop server at {self.base_url} ({type(exc).__name__}: "
                f"{exc}); {_START_HINT}",
                url=self.base_url,
            ) from exc
        if response.status_code >= 400:
            raise WebShopError(
                f"HTTP {response.status_code} for {method} {response.url}",
                url=str(response.url),
                status=response.status_code,
            )
        return parse_page(str(response.url), response.text, self.base_url)


# -- environment ---------------------------------------------------------------------------------


class WebShopSearchInput(BaseModel):
    """What the model passes to ``webshop_search``."""

    query: str = Field(description="Product keywords, e.g. 'men's blue running shoes size 10'.")


class WebShopClickInput(BaseModel):
    """What the model passes to ``webshop_click``."""

    target: str = Field(
        description=(
            "What to click, exactly as shown in brackets on the page: a product ASIN, an option "
            "value, or a button such as 'Buy Now', 'Description', 'Next >', 'Back to Search'; "
            "'back' clicks the page's '< ...' button."
        )
    )


class WebShopEnvironment(Environment):
    """WebShop goals as tasks; the interactor shops through a running server; reward = score.

    Args:
        base_url: The server's root; None reads ``$WEBSHOP_URL``.
        goal_indices: The goals to run, in order (default: the 500 test goals).
        timeout: Seconds to wait for each page.
        client: A :class:`WebShopClient` to use instead of one built from ``base_url``.

    Raises:
        WebShopUnavailable: no server URL is given or set (a server that does not answer is
            reported by the first call that needs it: :meth:`tasks` or :meth:`start`).
    """

    name = "webshop"
    experience_type = "sop"
    metric_names = ("score", "success")
    outcome_observable = True  # the shop pays its reward to the agent
    concurrent_tasks = False  # the tools act on the one open session

    def __init__(
        self,
        base_url: str | None = None,
        *,
        goal_indices: Sequence[int] = TEST_GOALS,
        timeout: float = DEFAULT_TIMEOUT,
        client: WebShopClient | None = None,
    ) -> None:
        indices = tuple(goal_indices)
        bad = [i for i in indices if isinstance(i, bool) or not isinstance(i, int) or i < 0]
        if bad or not indices:
            raise ValueError(f"goal_indices must be non-empty ints >= 0; bad: {bad[:5]}")
        self.client = (
            client if client is not None else WebShopClient(resolve_webshop_url(base_url), timeout)
        )
        self.goal_indices = indices
        self._instructions: dict[int, str] = {}
        self._current: str | None = None
        self._rewards: dict[str, float | None] = {}

    def tasks(self, limit: int | None = None) -> list[Task]:
        """One task per goal; the query is the goal's instruction, read from the server."""
        out = []
        for idx in self.goal_indices[:limit]:
            if idx not in self._instructions:
                self._instructions[idx] = self.client.instruction(idx)
            out.append(
                Task(
                    id=f"webshop-{idx}",
                    query=self._instructions[idx],
                    meta={"goal_index": idx, "session_id": WebShopClient.session_id(idx)},
                )
            )
        return out

    def start(self, task: Task) -> None:
        """Open the task's episode on its goal's search page."""
        idx = task.meta.get("goal_index")
        if not isinstance(idx, int):
            raise ValueError(f"task {task.id!r} has no meta['goal_index']; use this env's tasks()")
        self.client.reset(idx)
        self._current = task.id
        self._rewards.pop(task.id, None)

    def finish(self, task: Task) -> None:
        """Close the episode, keeping its reward (None: nothing was bought) for :meth:`score`."""
        if self._current == task.id:
            self._rewards[task.id] = self.client.reward
            self._current = None

    def score(self, task: Task, answer: str | None) -> Outcome:
        """The episode's reward as score (0 when nothing was bought); success = reward 1.

        The ``answer`` is ignored: only the server's grading of the purchase counts.
        """
        if self._current == task.id:
            reward = self.client.reward
        elif task.id in self._rewards:
            reward = self._rewards[task.id]
        else:
            raise ValueError(f"task {task.id!r} was never started; call start(task) first")
        value = min(max(reward or 0.0, 0.0), 1.0)
        success = reward is not None and reward >= 1.0
        return Outcome(
            score=value, success=success, metrics={"score": value, "success": float(success)}
        )

    def tools(self) -> EnvTools:
        """``webshop_search`` and ``webshop_click`` for the interactor, on the open episode."""
        return EnvTools(interactor=(self._search_tool(), self._click_tool()))

    def _act(self, run: Callable[[], WebShopPage]) -> str:
        # Every failure comes back as text the model can act on; the tools never raise.
        if self._current is None:
            return (
                "Error: no WebShop episode is open (the runner opens one per task). "
                "Stop and report that the shop is not available."
            )
        page = self.client.page
        if page is not None and page.done:
            return (
                f"The episode is over: you bought {page.asin} (reward {page.reward}). "
                "Stop and give your final answer."
            )
        try:
            return run().observation()
        except InvalidWebShopAction as exc:
            return f"Error: {exc}. Retry with one of the available actions."
        except (WebShopError, ValueError) as exc:
            return f"Error: the shop failed ({exc}). Retry once; if it fails again, stop."

    def _search_tool(self) -> BaseTool:
        def webshop_search(query: str) -> str:
            if not query.strip():
                return (
                    "Error: the query is empty. Retry webshop_search with a few product keywords "
                    "from the instruction, e.g. 'blue running shoes men size 10'."
                )
            return self._act(lambda: self.client.search(query))

        return StructuredTool.from_function(
            func=webshop_search,
            name="webshop_search",
            description=(
                "Search the shop for products. Give product keywords from the instruction; get "
                "the first results page (ASIN, title, price of each product)."
            ),
            args_schema=WebShopSearchInput,
        )

    def _click_tool(self) -> BaseTool:
        def webshop_click(target: str) -> str:
            return self._act(lambda: self.client.click(target))

        return StructuredTool.from_function(
            func=webshop_click,
            name="webshop_click",
            description=(
                "Click something on the current page: a product ASIN to open it, an option value "
                "to choose it (e.g. a size or color), 'Description'/'Features'/'Reviews' for "
                "details, 'back' or 'Back to Search' to go back, 'Next >' for more results, "
                "'Buy Now' to buy the open product with the chosen options (ends the episode)."
            ),
            args_schema=WebShopClickInput,
        )
