"""WebShop pages: the HTML the server sends, read into text observations and clickables.

:func:`parse_page` turns one ``web_agent_site`` page into a :class:`WebShopPage`: its kind
(search, results, item, item sub-page, done), the text an agent reads and every button, product
link and option value it may click. :class:`~genmem.envs.webshop.WebShopClient` fetches the
pages; this module only reads them.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, unquote

import httpx

from genmem.errors import GenMemError

__all__ = [
    "MAX_OBSERVATION_CHARS",
    "Clickable",
    "InvalidWebShopAction",
    "WebShopError",
    "WebShopPage",
    "WebShopUnavailable",
    "parse_page",
    "url_segment",
]

MAX_OBSERVATION_CHARS = 3000
"""Most characters of page text in one observation (reviews pages run long)."""


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


def url_segment(value: str) -> str:
    """``value`` quoted as one URL path segment (slashes too), as WebShop's routes expect."""
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
                url_segment(s)
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
