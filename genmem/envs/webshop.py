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

import ast
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, unquote

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from genmem.envs.base import Environment, EnvTools, Outcome, Task
from genmem.errors import GenMemError

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
MAX_OBSERVATION_CHARS = 3000
"""Most characters of page text in one observation (reviews pages run long)."""
TEST_GOALS = range(500)
"""Goal indices of WebShop's test split (what its baselines and ReAct evaluate on)."""

_START_HINT = (
    "start one from a WebShop checkout (github.com/princeton-nlp/WebShop): ./setup.sh -d small, "
    "then python -m web_agent_site.app --log (port 3000), and pass "
    f"base_url='http://127.0.0.1:3000' or set {WEBSHOP_URL_ENV}"
)


class WebShopError(GenMemError, RuntimeError):
    """The WebShop server answered with an error or with a page this client cannot read."""

    def __init__(self, message: str, *, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class WebShopUnavailable(WebShopError):
    """No WebShop server is configured, or the one configured does not answer as WebShop."""


class InvalidWebShopAction(GenMemError, ValueError):
    """An action the current page does not offer (unknown button, empty query, episode over)."""

    def __init__(self, message: str, *, action: str) -> None:
        super().__init__(message)
        self.action = action


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


# -- pages ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clickable:
    """Something on a page the agent can click: a button, a product link or an option value."""

    label: str
    """The text the agent clicks by (``Buy Now``, an ASIN, an option value)."""
    method: str
    """HTTP method the page would use (``GET`` for links and options, ``POST`` for buttons)."""
    url: str | None
    """Where the click goes; None when the page gives no target (the click is refused)."""
    group: str | None = None
    """For an option value, the option's name (``size``, ``color``)."""


@dataclass(frozen=True)
class WebShopPage:
    """One WebShop page, parsed: where it is, what it says, what can be clicked."""

    url: str
    kind: str
    """``search``, ``results``, ``item``, ``sub_page``, ``done`` or ``unknown``."""
    instruction: str | None
    lines: tuple[str, ...]
    """Visible text in page order (instruction left out), clickables written ``[label]``."""
    clickables: tuple[Clickable, ...]
    has_search_bar: bool
    reward: float | None = None
    """The purchase's reward, on the done page only."""
    keywords: tuple[str, ...] = ()
    page_number: int | None = None
    asin: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    """Options chosen so far on a product page."""
    sub_page: str | None = None

    @property
    def done(self) -> bool:
        """True once ``Buy Now`` was clicked (the page shows the reward)."""
        return self.kind == "done"

    def actions(self) -> list[str]:
        """The actions this page offers, written as WebShop's text environment writes them."""
        if self.done:
            return []
        return ["search[<keywords>]"] + [f"click[{c.label}]" for c in self.clickables if c.url]

    def header(self) -> str:
        """One line saying where the agent is."""
        if self.kind == "results":
            words = " ".join(self.keywords)
            return f"Search results for '{words}', page {self.page_number}."
        if self.kind == "item":
            chosen = ", ".join(f"{k}={v}" for k, v in self.options.items()) or "none"
            return f"Product {self.asin} (options chosen: {chosen})."
        if self.kind == "sub_page":
            return f"{self.sub_page} of product {self.asin}."
        if self.kind == "done":
            return f"Purchase done: product {self.asin}, reward {self.reward}."
        if self.kind == "search":
            return "Search page."
        return "WebShop page."

    def observation(self, max_chars: int = MAX_OBSERVATION_CHARS) -> str:
        """Header, page text (cut at ``max_chars``) and the available actions, for a model."""
        body = "\n".join(self.lines)
        if len(body) > max_chars:
            body = body[:max_chars].rstrip() + " ... (cut)"
        if self.done:  # the rest of the done page is thanks and an MTurk code
            return f"{self.header()}\nThe episode is over."
        actions = "Available actions: " + " | ".join(self.actions())
        return "\n".join(p for p in (self.header(), body, actions) if p)

    def find(self, target: str) -> Clickable:
        """The clickable ``target`` names: its label in any case (``size: large`` names an option
        value with its option; ``next``, ``prev`` and ``back`` name the paging buttons).

        Raises:
            InvalidWebShopAction: nothing or more than one thing on the page matches.
        """
        wanted = _strip_action(target)
        live = [c for c in self.clickables if c.url]
        for key in (_norm, _loose):  # exact words first, then letters and digits only
            w = key(wanted)
            found = [
                c
                for c in live
                if w and (key(c.label) == w or (c.group and key(f"{c.group}: {c.label}") == w))
            ]
            if found:
                return _one(found, target)
        # Paging words name the arrow buttons, whatever the server labels them
        # ("< Prev", "< Back to Results", "< Back to Item Page", "Next >").
        arrow = _ARROWS.get(_loose(wanted) or wanted.strip())
        if arrow is not None:
            found = [c for c in live if c.group is None and arrow(c.label.strip())]
            if found:
                return _one(found, target)
        offered = ", ".join(c.label for c in live) or "nothing"
        raise InvalidWebShopAction(
            f"{target!r} is not clickable on this page; click one of: {offered}", action=target
        )


def _one(found: list[Clickable], target: str) -> Clickable:
    if len({c.url for c in found}) == 1:
        return found[0]
    named = ", ".join(f"'{c.group}: {c.label}'" if c.group else c.label for c in found)
    raise InvalidWebShopAction(
        f"{target!r} matches {len(found)} things on this page; click one of: {named}",
        action=target,
    )


def _back(label: str) -> bool:
    return label.startswith("<")


def _forward(label: str) -> bool:
    return label.endswith(">")


_ARROWS: dict[str, Callable[[str], bool]] = {
    "back": _back,
    "prev": _back,
    "previous": _back,
    "<": _back,
    "next": _forward,
    ">": _forward,
}


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _loose(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def _strip_action(target: str) -> str:
    text = target.strip()
    m = re.fullmatch(r"click\s*\[(.*)\]", text, flags=re.DOTALL | re.IGNORECASE)
    if m:
        text = m.group(1).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text


# -- HTML -> page --------------------------------------------------------------------------------

_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source"}
)
_INVISIBLE = frozenset({"script", "style", "head", "title", "noscript", "template"})
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)


@dataclass
class _Open:
    tag: str
    hidden: bool
    role: str | None = None


class _PageParser(HTMLParser):
    """Collects visible text, clickables, the instruction and the reward of one page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[_Open] = []
        # ("text", s) | ("click", index, row) | ("label", for_id, s)
        self.segments: list[tuple[Any, ...]] = []
        self.clickables: list[Clickable] = []
        self.radio_ids: set[str] = set()
        self.instruction: list[str] | None = None
        self.reward_text: str | None = None
        self.has_search_bar = False
        self._form: dict[str, Any] | None = None
        self._collect: list[str] | None = None  # text of the open a / button / label
        self._collect_attrs: dict[str, str] = {}
        self._in_instruction = False
        self._instruction_complete = False
        self._want_reward_pre = False
        self._in_reward_pre: list[str] | None = None

    @property
    def hidden(self) -> bool:
        return bool(self.stack) and self.stack[-1].hidden

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        hidden = (
            self.hidden
            or tag in _INVISIBLE
            or "hidden" in a
            or bool(_HIDDEN_STYLE.search(a.get("style", "")))
        )
        if tag == "input":
            self._input(a, hidden)
            return
        if tag in _VOID:
            return
        role = None
        if a.get("id") == "instruction-text":
            role, self._in_instruction = "instruction", True
            self.instruction = []
        elif a.get("id") == "reward":
            role, self._want_reward_pre = "reward", True
        elif tag == "pre" and self._want_reward_pre and self._in_reward_pre is None:
            role, self._in_reward_pre = "reward_pre", []
        elif tag == "form":
            role = "form"
            self._form = {
                "action": a.get("action", ""),
                "method": (a.get("method") or "get").upper(),
                "search": False,
            }
        elif tag in ("a", "button", "label") and self._collect is None and not hidden:
            if tag != "a" or a.get("href"):
                role, self._collect, self._collect_attrs = tag, [], a
        self.stack.append(_Open(tag, hidden, role))

    def _input(self, a: dict[str, str], hidden: bool) -> None:
        kind = a.get("type", "text").lower()
        if a.get("name") == "search_query" and self._form is not None:
            self._form["search"] = True
            self.has_search_bar = True
        elif kind == "radio" and not hidden and a.get("value"):
            if a.get("id"):
                self.radio_ids.add(a["id"])
            name = a.get("name")
            self._add_click(
                Clickable(a["value"], "GET", a.get("data-url") or None, group=name),
                row=f"option {name}",
            )
        elif kind == "submit" and not hidden and self._form is not None and a.get("value"):
            self._add_click(
                Clickable(a["value"], self._form["method"], self._form["action"] or None),
                row="button",
            )

    def _add_click(self, clickable: Clickable, row: str | None = None) -> None:
        # Clickables of one row (buttons, values of one option) share a line; links do not.
        self.clickables.append(clickable)
        self.segments.append(("click", len(self.clickables) - 1, row))

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID or not any(o.tag == tag for o in self.stack):
            return
        while self.stack:
            opened = self.stack.pop()
            self._close(opened)
            if opened.tag == tag:
                break

    def _close(self, opened: _Open) -> None:
        if opened.role == "instruction":
            self._in_instruction = False
        elif self._in_instruction and self.instruction and "".join(self.instruction).strip():
            # Only the first block is the instruction (the next one repeats the query).
            self._instruction_complete = True
        elif opened.role == "reward_pre" and self._in_reward_pre is not None:
            self.reward_text = " ".join("".join(self._in_reward_pre).split())
            self._want_reward_pre = False
        elif opened.role == "form":
            self._form = None
        elif opened.role in ("a", "button", "label") and self._collect is not None:
            text = " ".join("".join(self._collect).split())
            attrs, self._collect = self._collect_attrs, None
            if not text:
                return
            if opened.role == "label":
                self.segments.append(("label", attrs.get("for", ""), text))
            elif opened.role == "a":
                self._add_click(Clickable(text, "GET", attrs.get("href") or None))
            elif self._form is not None and self._form["search"]:
                return  # the search form's own button: searching is its own action
            elif self._form is not None:
                self._add_click(
                    Clickable(text, self._form["method"], self._form["action"] or None),
                    row="button",
                )
            else:
                self.segments.append(("text", text))

    def handle_data(self, data: str) -> None:
        if self._in_reward_pre is not None and self.reward_text is None:
            self._in_reward_pre.append(data)
        if self.hidden:
            return
        if self._in_instruction and self.instruction is not None:
            if not self._instruction_complete:
                self.instruction.append(data)
            return
        if self._collect is not None:
            self._collect.append(data)
            return
        text = " ".join(data.split())
        if text:
            self.segments.append(("text", text))

    def lines(self) -> list[str]:
        out: list[str] = []
        last_row: str | None = None
        for seg in self.segments:
            if seg[0] == "label":
                if seg[1] in self.radio_ids:
                    continue  # the radio button itself is listed as [value]
                seg = ("text", seg[2])
            if seg[0] == "click":
                item, row = f"[{self.clickables[seg[1]].label}]", seg[2]
                if row is not None and row == last_row and out:
                    out[-1] += " " + item
                else:
                    out.append(item)
                last_row = row
            else:
                out.append(seg[1])
                last_row = None
        return out


@dataclass(frozen=True)
class _Route:
    kind: str
    session: str | None = None
    keywords: str | None = None
    page: str | None = None
    asin: str | None = None
    sub_page: str | None = None
    options: str | None = None


def _route(url: str, base_url: str) -> _Route:
    raw = httpx.URL(url).raw_path.decode("ascii", "replace").split("?", 1)[0]
    base_path = httpx.URL(base_url).raw_path.decode("ascii", "replace").rstrip("/")
    if base_path and raw.startswith(base_path):
        raw = raw[len(base_path) :]
    parts = [unquote(p) for p in raw.strip("/").split("/")] if raw.strip("/") else []
    head, n = (parts[0] if parts else ""), len(parts)
    if head == "search_results" and n == 4:
        return _Route("results", parts[1], keywords=parts[2], page=parts[3])
    if head == "item_page" and n == 6:
        return _Route(
            "item", parts[1], asin=parts[2], keywords=parts[3], page=parts[4], options=parts[5]
        )
    if head == "item_sub_page" and n == 7:
        return _Route(
            "sub_page",
            parts[1],
            asin=parts[2],
            keywords=parts[3],
            page=parts[4],
            sub_page=parts[5],
            options=parts[6],
        )
    if head == "done" and n == 4:
        return _Route("done", parts[1], asin=parts[2], options=parts[3])
    if n == 1:
        return _Route("search", parts[0])
    return _Route("unknown")


def _keywords(raw: str | None) -> list[str]:
    # As web_agent_site's convert_web_app_string_to_var: a list literal, else one keyword.
    if raw is None:
        return []
    if raw.startswith("["):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = None
        if isinstance(value, list):
            return [str(v) for v in value]
    return [raw]


def _options(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _segment(value: str) -> str:
    return quote(value, safe="")


def parse_page(url: str, html: str, base_url: str) -> WebShopPage:
    """Parse the WebShop page served at ``url`` (``base_url``: the server's root).

    Raises:
        WebShopError: a done page whose reward cannot be read.
    """
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    route = _route(url, base_url)
    options = _options(route.options)
    here = httpx.URL(url)
    clickables = []
    for c in parser.clickables:
        target = str(here.join(c.url)) if c.url else None
        if target is None and c.group is not None and route.kind == "item":
            # An option radio without data-url: the item page with this option added.
            path = "/".join(
                _segment(s)
                for s in (
                    route.session or "",
                    route.asin or "",
                    route.keywords or "",
                    route.page or "",
                    str({**options, c.group: c.label}),
                )
            )
            target = f"{base_url}/item_page/{path}"
        clickables.append(Clickable(c.label, c.method, target, c.group))
    reward = _reward(parser.reward_text)
    if route.kind == "done" and reward is None:
        raise WebShopError(
            f"the done page at {url} shows no readable reward (#reward <pre>"
            f"{parser.reward_text!r}</pre>); is this WebShop's web_agent_site?",
            url=url,
        )
    return WebShopPage(
        url=url,
        kind="done" if reward is not None else route.kind,
        instruction=_instruction(parser.instruction),
        lines=tuple(parser.lines()),
        clickables=tuple(clickables),
        has_search_bar=parser.has_search_bar,
        reward=reward,
        keywords=tuple(_keywords(route.keywords)),
        page_number=int(route.page) if route.page and route.page.isdigit() else None,
        asin=route.asin,
        options=options,
        sub_page=route.sub_page,
    )


def _instruction(parts: list[str] | None) -> str | None:
    if parts is None:
        return None
    text = " ".join("".join(parts).split())
    text = re.sub(r"^instruction\s*:\s*", "", text, flags=re.IGNORECASE)
    return text or None


def _reward(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# -- client --------------------------------------------------------------------------------------


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
        url = f"{self.base_url}/{_segment(session)}"
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
    metric_names = ("score", "success")

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
