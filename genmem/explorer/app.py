"""The bank explorer: a Starlette app of server-rendered pages and a JSON API over one bank.

Every page has a JSON twin under ``/api`` built from the same data: the SID prefix tree
(``/tree/3-0``), an entry with its history and word diffs (``/entry/3-0-7-1``), the filtered
log (``/log``), search by SID prefix or by text through the bank's TF-IDF index (``/search``),
codebook utilisation (``/utilisation``) and, with a runs folder, an evolution run's plots and
summary (``/runs``). Every list is paged, and every page reads a :class:`BankView` that follows
the bank through its log, so a 100,000-entry bank answers as fast as a small one.

Read-only unless ``allow_writes``: then an entry can be revised or deleted through
:meth:`Bank.revise` with the write gate, as every other writer does. Bad input is answered with
a 4xx page (or ``{"error": ...}``) naming what was wrong; nothing is written. Templates escape
everything they print (Jinja autoescape); form posts carry a per-process token and JSON posts
must be ``application/json``, so another web page cannot post to the explorer; on a loopback
host, requests naming another host are refused (DNS rebinding).
"""

from __future__ import annotations

import math
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from genmem.errors import (
    GenMemError,
    InvalidSID,
    InvalidUpdate,
    ReadOnlyBank,
    SlotEmpty,
    VersionConflict,
)
from genmem.explorer.config import LOOPBACK_HOSTS, MAX_PAGE_SIZE, ExplorerConfig
from genmem.explorer.diff import diff_stats, unified_diff, word_diff
from genmem.explorer.runs import find_runs, run_file
from genmem.explorer.view import OPS, OUTCOMES, BankView, EventFilter, describe_filter, parse_codes
from genmem.memory.gate import WriteGate

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = ["create_app"]

_TEXT_RESULTS = 200  # most TF-IDF hits a search pages through
_HERE = Path(__file__).parent


class _BadRequest(GenMemError, ValueError):
    """A query parameter or form field that is not what the page takes."""


class _Refused(GenMemError, PermissionError):
    """A write on a read-only explorer, or a post without the form token."""


def _status(exc: Exception) -> int:
    if isinstance(exc, LookupError) and not isinstance(exc, SlotEmpty):
        return 404
    if isinstance(exc, (_Refused, ReadOnlyBank)):
        return 403
    if isinstance(exc, (VersionConflict, SlotEmpty)):
        return 409
    if isinstance(exc, _GateRefused):
        return 422
    return 400


class _NotFound(GenMemError, LookupError):
    """A page or slot that does not exist."""


# -- request parsing --------------------------------------------------------------------------


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _BadRequest(f"{name}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise _BadRequest(f"{name}={value} must be in {low}..{high}")
    return value


def _time_param(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise _BadRequest(
            f"{name}={raw!r} is not a time: write 2026-11-26T15:00 (UTC) or Unix seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _choice(request: Request, name: str, allowed: tuple[str, ...]) -> str | None:
    raw = request.query_params.get(name, "")
    if raw == "":
        return None
    if raw not in allowed:
        raise _BadRequest(f"{name}={raw!r} is not one of {', '.join(allowed)}")
    return raw


def _fmt_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _path(codes: tuple[int, ...] | list[int]) -> str:
    return "-".join(map(str, codes))


# -- the app ----------------------------------------------------------------------------------


class _Explorer:
    """Page data for one bank; each method returns the JSON-able dict a page renders."""

    def __init__(self, bank: Bank, config: ExplorerConfig) -> None:
        self.bank = bank
        self.config = config
        self.view = BankView(bank, index_max_age=config.index_max_age)
        self.env = Environment(
            loader=PackageLoader("genmem.explorer", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["time"] = _fmt_time
        self.env.filters["pct"] = lambda x: f"{100 * x:.2f}%"
        self.env.globals["qs"] = lambda **kw: urlencode(
            {k: v for k, v in kw.items() if v not in (None, "")}
        )

    # -- shared -------------------------------------------------------------------------------

    def base(self) -> dict[str, Any]:
        view = self.view
        view.refresh()
        spec = self.bank.spec
        return {
            "bank": {
                "bank_id": self.bank.bank_id,
                "url": self.bank.store.url,
                "sizes": list(spec.sizes),
                "spec": str(spec),
                "levels": spec.levels,
                "capacity": spec.capacity,
                "codebook_hash": self.bank.codebook_hash,
                "read_only_bank": self.bank.read_only,
                "entries": view.entries,
                "last_seq": view.last_seq,
            },
            "writes": self.config.allow_writes and not self.bank.read_only,
            "has_runs": self.config.runs is not None,
        }

    def render(self, template: str, data: dict[str, Any], status: int = 200) -> HTMLResponse:
        ctx = {**data, "token": self.config.token}
        html = self.env.get_template(template).render(**ctx)
        return HTMLResponse(html, status_code=status)

    def codes(self, text: str, *, exact: bool = False) -> tuple[int, ...]:
        return parse_codes(text, self.bank, exact=exact)

    # -- pages --------------------------------------------------------------------------------

    def tree(self, request: Request, raw: str) -> dict[str, Any]:
        data = self.base()
        prefix = self.codes(raw)
        spec = self.bank.spec
        if len(prefix) == spec.levels:
            raise _Redirect(f"/entry/{_path(prefix)}")
        limit = _int_param(request, "limit", 100, 1, MAX_PAGE_SIZE)
        page = _int_param(request, "page", 1, 1, 10**9)
        occupied_only = request.query_params.get("occupied", "") == "1"
        depth = len(prefix)
        crumbs = [{"label": "root", "path": ""}] + [
            {"label": spec.token(i + 1, c), "path": _path(prefix[: i + 1])}
            for i, c in enumerate(prefix)
        ]
        count = self.view.count(prefix)
        data |= {
            "prefix": _path(prefix),
            "prefix_sid": spec.prefix_string(prefix),
            "depth": depth,
            "crumbs": crumbs,
            "count": count,
            "capacity": self.view.capacity(depth),
            "occupancy": count / self.view.capacity(depth),
            "occupied_only": occupied_only,
            "page": page,
            "limit": limit,
        }
        offset = (page - 1) * limit
        if depth == spec.levels - 1:
            sids, total = self.view.sids_under(prefix, offset=offset, limit=limit)
            data |= {"leaves": self._entry_rows(sids), "total": total}
        else:
            children, total = self.view.children(
                prefix, offset=offset, limit=limit, occupied_only=occupied_only
            )
            data |= {"children": [c.model_dump() for c in children], "total": total}
        data["pages"] = max(1, math.ceil(data["total"] / limit))
        return data

    def _entry_rows(self, sids: list[tuple[int, ...]]) -> list[dict[str, Any]]:
        rows = []
        for codes in sids:
            e = self.bank.get(self.bank.spec.make(codes))
            if e is None:  # deleted after the view was refreshed
                continue
            rows.append({**e.model_dump(mode="json"), "path": _path(codes)})
        return rows

    def entry(self, request: Request, raw: str) -> dict[str, Any]:
        data = self.base()
        codes = self.codes(raw, exact=True)
        sid = self.bank.spec.make(codes)
        history = self.bank.history(sid)
        if not history:
            raise _NotFound(f"slot {sid} ({_path(codes)}) has never held an entry")
        limit = _int_param(request, "limit", 20, 1, MAX_PAGE_SIZE)
        page = _int_param(request, "page", 1, 1, 10**9)
        newest = list(reversed(history))
        shown = newest[(page - 1) * limit : page * limit]
        versions = []
        for v in shown:
            prev = history[v.version - 2] if v.version > 1 else None
            segs = word_diff(prev.payload if prev else "", v.payload)
            versions.append(
                {
                    **v.model_dump(mode="json"),
                    "diff": [s.model_dump() for s in segs] if prev else None,
                    "changes": diff_stats(segs) if prev else None,
                }
            )
        current = history[-1]
        data |= {
            "sid": str(sid),
            "path": _path(codes),
            "parent": _path(codes[:-1]),
            "current": current.model_dump(mode="json"),
            "live": not current.deleted,
            "versions": versions,
            "version_count": len(history),
            "page": page,
            "pages": max(1, math.ceil(len(history) / limit)),
            "limit": limit,
        }
        a = _int_param(request, "a", 0, 0, len(history))
        b = _int_param(request, "b", 0, 0, len(history))
        if a and b:
            old, new = history[a - 1].payload, history[b - 1].payload
            data["compare"] = {
                "a": a,
                "b": b,
                "diff": [s.model_dump() for s in word_diff(old, new)],
                "unified": unified_diff(old, new, f"v{a}", f"v{b}"),
            }
        elif a or b:
            raise _BadRequest("compare needs both a and b (version numbers)")
        return data

    def log(self, request: Request) -> dict[str, Any]:
        data = self.base()
        sid_raw = request.query_params.get("sid", "").strip()
        sid = str(self.bank.spec.make(self.codes(sid_raw, exact=True))) if sid_raw else None
        flt = EventFilter(
            op=_choice(request, "op", OPS),
            outcome=_choice(request, "outcome", OUTCOMES),
            actor=request.query_params.get("actor") or None,
            sid=sid,
            since=_time_param(request, "since"),
            until=_time_param(request, "until"),
        )
        limit = _int_param(request, "limit", self.config.page_size, 1, MAX_PAGE_SIZE)
        before = _int_param(request, "before", 0, 0, 2**62) or None
        page = self.view.event_page(flt, before=before, limit=limit)
        params = {
            k: request.query_params.get(k, "")
            for k in ("op", "outcome", "actor", "sid", "since", "until")
        }
        data |= {
            "filter": describe_filter(flt),
            "params": params,
            "limit": limit,
            "before": before,
            "events": [
                {**e.model_dump(mode="json"), "path": _path(self.bank.spec.parse(e.sid).codes)}
                for e in page.events
            ],
            "matching": page.matching,
            "next_before": page.next_before,
            "ops": OPS,
            "outcomes": OUTCOMES,
            "actors": self.view.actors(),
        }
        return data

    def search(self, request: Request) -> dict[str, Any]:
        data = self.base()
        q = request.query_params.get("q", "").strip()
        mode = _choice(request, "mode", ("auto", "sid", "text")) or "auto"
        limit = _int_param(request, "limit", 20, 1, _TEXT_RESULTS)
        page = _int_param(request, "page", 1, 1, math.ceil(_TEXT_RESULTS / limit))
        data |= {"q": q, "mode": mode, "limit": limit, "page": page, "results": None}
        if not q:
            return data
        looks_like_sid = q.startswith("<") or all(ch.isdigit() or ch in "-,. " for ch in q)
        if mode == "sid" or (mode == "auto" and looks_like_sid):
            codes = self.codes(q)
            kind = "entry" if len(codes) == self.bank.spec.levels else "tree"
            data["redirect"] = f"/{kind}/{_path(codes)}"
            data["kind"] = "sid"
            return data
        hits, index = self.view.search_text(q, page * limit)
        shown = hits[(page - 1) * limit :]
        results = []
        for sid, score in shown:
            e = self.bank.get(sid)
            if e is not None:
                path = _path(self.bank.spec.parse(sid).codes)
                results.append({**e.model_dump(mode="json"), "path": path, "score": score})
        data |= {
            "kind": "text",
            "results": results,
            "index": index.model_dump(),
            "more": len(hits) == page * limit and page * limit < _TEXT_RESULTS,
        }
        return data

    def utilisation(self) -> dict[str, Any]:
        data = self.base()
        metrics, levels = self.view.utilisation()
        data |= {
            "metrics": None if metrics is None else metrics.model_dump(mode="json"),
            "levels": [lv.model_dump() for lv in levels],
        }
        return data

    def runs(self) -> dict[str, Any]:
        data = self.base()
        if self.config.runs is None:
            raise _NotFound("no evolution runs: start the explorer with --runs DIR")
        data["runs"] = [r.model_dump() for r in find_runs(self.config.runs)]
        data["runs_root"] = str(self.config.runs)
        return data

    # -- writes -------------------------------------------------------------------------------

    def check_writable(self) -> None:
        if not self.config.allow_writes:
            raise _Refused(
                "this explorer is read-only; restart `genmem bank serve` with --allow-writes "
                "to revise or delete entries"
            )

    def write(self, raw: str, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        self.check_writable()
        if op not in ("revise", "delete"):
            raise _NotFound(f"no write {op!r}; the explorer can revise or delete an entry")
        codes = self.codes(raw, exact=True)
        unknown = set(fields) - {"payload", "expected_version"}
        if unknown:
            raise _BadRequest(f"unknown fields {sorted(unknown)}; send payload, expected_version")
        payload = "" if op == "delete" else fields.get("payload")
        if op == "revise" and (not isinstance(payload, str) or not payload.strip()):
            raise InvalidUpdate(
                "revise needs a non-empty payload; to delete the entry use delete instead"
            )
        expected = fields.get("expected_version")
        if isinstance(expected, str):
            if not expected.strip().isdigit():
                raise InvalidUpdate(f"expected_version {expected!r} is not a version number")
            expected = int(expected)
        gate = None if self.config.gate is None else WriteGate(config=self.config.gate)
        result = self.bank.revise(
            self.bank.spec.make(codes),
            payload,  # type: ignore[arg-type]
            expected_version=expected,
            actor=self.config.actor,
            gate=gate,
        )
        self.view.refresh()
        if result.outcome == "rejected":
            raise _GateRefused(
                f"the write gate refused the payload ({result.reason}: {result.detail}); the "
                "entry is unchanged and the refusal is in the log",
                result=result.model_dump(mode="json"),
            )
        return {"result": result.model_dump(mode="json"), "path": _path(codes)}


class _Redirect(Exception):
    def __init__(self, url: str) -> None:
        self.url = url


class _GateRefused(GenMemError, ValueError):
    """A revision the write gate refused (logged as a rejected event)."""

    def __init__(self, message: str, *, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def create_app(bank: Bank, config: ExplorerConfig | None = None) -> Starlette:
    """The explorer's ASGI app over ``bank`` (reads the bank's occupancy and log once, now)."""
    config = config or ExplorerConfig()
    ex = _Explorer(bank, config)

    def page(template: str, build: Any) -> Any:
        def html(request: Request) -> Response:
            data = build(request)
            if "redirect" in data:
                return RedirectResponse(data["redirect"], status_code=303)
            return ex.render(template, data)

        def api(request: Request) -> Response:
            return JSONResponse(build(request))

        return html, api

    tree_html, tree_api = page("tree.html", lambda r: ex.tree(r, r.path_params.get("p", "")))
    entry_html, entry_api = page("entry.html", lambda r: ex.entry(r, r.path_params["p"]))
    log_html, log_api = page("log.html", ex.log)
    search_html, search_api = page("search.html", ex.search)
    util_html, util_api = page("utilisation.html", lambda r: ex.utilisation())
    runs_html, runs_api = page("runs.html", lambda r: ex.runs())

    def plot(request: Request) -> Response:
        if config.runs is None:
            raise _NotFound("no evolution runs: start the explorer with --runs DIR")
        run, file = request.query_params.get("run", ""), request.query_params.get("file", "")
        path = run_file(find_runs(config.runs), run, file)
        if path is None:
            raise _NotFound(f"run {run!r} has no plot {file!r}")
        return FileResponse(path, media_type="image/png")

    async def form_write(request: Request) -> Response:
        ex.check_writable()
        if request.headers.get("content-type", "").split(";")[0] != (
            "application/x-www-form-urlencoded"
        ):
            raise _BadRequest("post the entry form (application/x-www-form-urlencoded)")
        body = (await request.body()).decode("utf-8", errors="strict")
        fields = {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}
        if not secrets.compare_digest(fields.pop("token", ""), config.token):
            raise _Refused("the form token is missing or stale; reload the page and retry")
        op = request.path_params["op"]
        out = ex.write(request.path_params["p"], op, fields)
        return RedirectResponse(f"/entry/{out['path']}?done={op}", status_code=303)

    async def api_write(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0] != "application/json":
            raise _BadRequest("send the write as a JSON object (Content-Type: application/json)")
        try:
            fields = await request.json()
        except ValueError:
            raise _BadRequest("the body is not valid JSON") from None
        if not isinstance(fields, dict):
            raise _BadRequest('the body must be a JSON object such as {"payload": "..."}')
        return JSONResponse(ex.write(request.path_params["p"], request.path_params["op"], fields))

    def error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, _Redirect):
            return RedirectResponse(exc.url, status_code=303)
        if isinstance(exc, HTTPException):
            status, message = (
                exc.status_code,
                (f"no page {request.url.path!r}" if exc.status_code == 404 else str(exc.detail)),
            )
        elif isinstance(exc, (GenMemError, InvalidSID)):
            status, message = _status(exc), str(exc)
        else:
            raise exc
        if request.url.path.startswith("/api/"):
            body: dict[str, Any] = {"error": message, "status": status}
            if isinstance(exc, _GateRefused):
                body["result"] = exc.result
            return JSONResponse(body, status_code=status)
        data = {"status": status, "message": message, "writes": False, "has_runs": False}
        data["bank"] = {"bank_id": bank.bank_id}
        return ex.render("error.html", data, status=status)

    ops = "{op:str}"
    routes = [
        Route("/", tree_html),
        Route("/tree/", tree_html),
        Route("/tree/{p:str}", tree_html),
        Route("/entry/{p:str}", entry_html),
        Route(f"/entry/{{p:str}}/{ops}", form_write, methods=["POST"]),
        Route("/log", log_html),
        Route("/search", search_html),
        Route("/utilisation", util_html),
        Route("/runs", runs_html),
        Route("/runs/plot", plot),
        Route("/api/tree/", tree_api),
        Route("/api/tree/{p:str}", tree_api),
        Route("/api/entry/{p:str}", entry_api),
        Route(f"/api/entry/{{p:str}}/{ops}", api_write, methods=["POST"]),
        Route("/api/events", log_api),
        Route("/api/search", search_api),
        Route("/api/utilisation", util_api),
        Route("/api/runs", runs_api),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    middleware = []
    if config.host in LOOPBACK_HOSTS:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS)))
    handlers: dict[Any, Any] = {
        HTTPException: error,
        GenMemError: error,
        _Redirect: error,
    }
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)
    app.state.view = ex.view
    return app
