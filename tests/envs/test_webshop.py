"""WebShop client and environment against a small fake of WebShop's ``web_agent_site``.

The fake (stdlib ``http.server`` on a free 127.0.0.1 port) serves the route shapes and the HTML
structure of the real Flask app, with a made-up catalogue and a made-up reward; it checks the
protocol, not WebShop's numbers. Real WebShop scores need the real server.
"""

from __future__ import annotations

import ast
import html
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import pytest

from genmem.envs.base import Task
from genmem.envs.webshop import (
    WEBSHOP_URL_ENV,
    InvalidWebShopAction,
    WebShopClient,
    WebShopEnvironment,
    WebShopError,
    WebShopUnavailable,
    parse_page,
    resolve_webshop_url,
)

# -- the fake server -----------------------------------------------------------------------------

PRODUCTS: dict[str, dict[str, Any]] = {
    "B000TSHIRT": {
        "title": "Red cotton t-shirt, crew neck",
        "price": "$12.99",
        "options": {"size": ["small", "medium", "large"], "color": ["red", "navy"]},
        "Description": "A soft cotton t-shirt. " * 300,
        "Features": "100% cotton; machine wash",
        "Reviews": "Fits well.",
    },
    "B000BOTTLE": {
        "title": "Stainless steel water bottle 750 ml",
        "price": "$19.50",
        "options": {},
        "Description": "Keeps drinks cold.",
        "Features": "Double wall",
        "Reviews": "Does not leak.",
    },
    "B000PENSXX": {
        "title": "Blue gel pens, pack of 12",
        "price": "$6.00",
        "options": {"pack": ["12", "24"]},
        "Description": "Smooth pens.",
        "Features": "0.7 mm",
        "Reviews": "Nice.",
    },
    "B000TSHIRB": {
        "title": "Navy cotton t-shirt, v neck",
        "price": "$11.00",
        "options": {"size": ["large"]},
        "Description": "Another shirt.",
        "Features": "",
        "Reviews": "",
    },
    "B000SOCKSX": {
        "title": "Red cotton socks",
        "price": "$5.00",
        "options": {},
        "Description": "Socks.",
        "Features": "",
        "Reviews": "",
    },
}
GOALS = [
    {
        "instruction": "i want a red cotton t-shirt in size large, price lower than 30.00 dollars",
        "asin": "B000TSHIRT",
        "options": {"size": "large", "color": "red"},
    },
    {
        "instruction": "find me a stainless steel water bottle",
        "asin": "B000BOTTLE",
        "options": {},
    },
    {"instruction": "a 24 pack of blue gel pens", "asin": "B000PENSXX", "options": {"pack": "24"}},
]
PER_PAGE = 2


def _q(value: Any) -> str:
    return quote(str(value), safe="")


def _reward(goal: dict[str, Any], asin: str, options: dict[str, str]) -> float:
    if asin != goal["asin"]:
        return 0.1
    wanted = goal["options"]
    hits = sum(options.get(k) == v for k, v in wanted.items())
    return (1 + hits) / (1 + len(wanted))


def _page(body: str, instruction: str | None, query: str | None = None) -> str:
    # As web_agent_site's templates: the search page breaks the instruction's h4 with <br>,
    # the other pages follow it with a second h4 that repeats the query.
    head = "<html><head><title>WebShop</title><script>var x = '<b>not text</b>';</script></head>"
    inst = ""
    if instruction is not None and query is None:
        inst = (
            '<div id="instruction-text" class="text-center">'
            f"<h4>Instruction: <br>{html.escape(instruction)}</h4></div>"
        )
    elif instruction is not None:
        inst = (
            f'<div id="instruction-text"><h4 style="padding:2px 10px;">Instruction: '
            f"{html.escape(instruction)}</h4>"
            f'<h4 style="padding:2px 10px;">Current Query: {html.escape(query)}</h4></div>'
        )
    return f"{head}<body><div class='container'>{inst}{body}</div></body></html>"


def _button(action: str, label: str) -> str:
    return (
        f'<form method="post" action="{action}">'
        f'<button type="submit" class="btn btn-primary">{html.escape(label)}</button></form>'
    )


@dataclass
class FakeWebShop:
    """State of the fake: how it renders, and what it was asked."""

    data_url: bool = True
    webshop: bool = True
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)

    def handle(self, method: str, path: str, form: dict[str, list[str]]) -> tuple[int, str, str]:
        """(status, location or '', html) for one request."""
        self.requests.append((method, path, form))
        if not self.webshop:
            return 200, "", "<html><body>hello</body></html>"
        parts = [unquote(p) for p in path.split("?")[0].strip("/").split("/")]
        session = parts[1] if len(parts) > 1 else parts[0]
        if "fixed" not in session:
            return 404, "", "not found"
        idx = int(session.split("_")[-1])
        if idx >= len(GOALS):
            return 500, "", "<h1>Internal Server Error</h1>"
        goal = GOALS[idx]
        inst = goal["instruction"]
        head = parts[0]
        if len(parts) == 1:
            if method == "POST" and "search_query" in form:
                keywords = form["search_query"][0].lower().split(" ")
                return 302, f"/search_results/{_q(session)}/{_q(keywords)}/1", ""
            search = (
                f'<form method="post" action="/{_q(session)}"><div class="input-group">'
                '<input id="search_input" type="text" name="search_query" required/>'
                '<span><button class="btn btn-success" type="submit"><i class="glyphicon"></i>'
                "Search</button></span></div></form>"
            )
            return 200, "", _page(search, inst)
        back = _button(f"/{_q(session)}", "Back to Search")
        if head == "search_results" and len(parts) == 4:
            keywords, page = ast.literal_eval(parts[2]), int(parts[3])
            hits = [
                a for a, p in PRODUCTS.items() if any(k in p["title"].lower() for k in keywords)
            ]
            shown = hits[(page - 1) * PER_PAGE : page * PER_PAGE]
            body = [f"<h1>Results</h1><p>Page {page} of {len(hits)} total results</p>", back]
            if page > 1:
                body.append(
                    _button(f"/search_results/{_q(session)}/{_q(keywords)}/{page - 1}", "< Prev")
                )
            if page * PER_PAGE < len(hits):
                body.append(
                    _button(f"/search_results/{_q(session)}/{_q(keywords)}/{page + 1}", "Next >")
                )
            for asin in shown:
                item = f"/item_page/{_q(session)}/{asin}/{_q(keywords)}/{page}/{_q({})}"
                body.append(
                    f'<div class="list-group-item"><a class="product-link" href="{item}">'
                    f'<h4 class="product-asin">{asin}</h4></a>'
                    f'<h4 class="product-title">{html.escape(PRODUCTS[asin]["title"])}</h4>'
                    f'<h5 class="product-price">{PRODUCTS[asin]["price"]}</h5></div>'
                )
            return 200, "", _page("".join(body), inst, str(keywords))
        if head in ("item_page", "item_sub_page"):
            asin, kw, page = parts[2], parts[3], parts[4]
            options = ast.literal_eval(parts[-1])
            product = PRODUCTS[asin]
            prefix = f"{_q(session)}/{asin}/{_q(kw)}/{page}"
            if head == "item_sub_page":
                sub = parts[5]
                body = [
                    back,
                    _button(f"/item_page/{prefix}/{_q(options)}", "< Back to Item Page"),
                    f"<div name='{sub.lower()}'><p class='product-info'>"
                    f"{html.escape(product[sub])}</p></div>",
                ]
                return 200, "", _page("".join(body), inst, kw)
            body = [
                back,
                _button(f"/search_results/{_q(session)}/{_q(kw)}/{page}", "< Back to Results"),
                f'<img id="product-image" src="https://example.invalid/{asin}.jpg">',
                f"<h2>{html.escape(product['title'])}</h2><h4>Price: {product['price']}</h4>",
            ]
            for name, values in product["options"].items():
                body.append(f'<div class="row"><h4>{name}</h4><div class="radio-toolbar">')
                for i, value in enumerate(values):
                    url = f"/item_page/{prefix}/{_q({**options, name: value})}"
                    data = f' data-url="{url}"' if self.data_url else ""
                    body.append(
                        f'<input type="radio" id="radio_{name}{i}" name="{name}" '
                        f'value="{value}"{data}><label for="radio_{name}{i}">{value}</label>'
                    )
                body.append("</div></div>")
            body.append(f"<script>let options = {json.dumps(options)};</script>")
            for sub in ("Description", "Features", "Reviews"):
                body.append(_button(f"/item_sub_page/{prefix}/{sub}/{_q(options)}", sub))
            body.append(_button(f"/done/{_q(session)}/{asin}/{_q(options)}", "Buy Now"))
            return 200, "", _page("".join(body), inst, kw)
        if head == "done" and len(parts) == 4:
            asin, options = parts[2], ast.literal_eval(parts[3])
            reward = _reward(goal, asin, options)
            body = (  # done_page.html, malformed </p> closers included
                '<div id="thankyou" class="text-center"><h1>Thank you for shopping with us!</h1>'
                '</div><div id="stats" class="text-center"><h3 align="mturk_code">Your code: </h3>'
                "<p><pre>CODE</pre> (Paste it in your MTurk interface.)</p>"
                '<div style="display:none"><h2 align="left">Purchased</h2>'
                f'<h4 id="asin">asin<pre>{asin}</pre></p>'
                f'<h4 id="goal-asin">asin<pre>{goal["asin"]}</pre></p>'
                f'<h4 id="goal-instruction-text">instuction text<pre>{html.escape(inst)}</pre></h4>'
                '<h2 align="left">Reward</h2></div><hr class="solid">'
                f'<h3   id="reward">Your score (min 0.0, max 1.0)<pre>{reward}</pre></h3>'
                f"<h4 hidden>Reward Details <div id='reward_info'><pre>{{'r': 1}}</pre></div></h4>"
                "</div>"
            )
            return 200, "", _page(body, None)
        return 404, "", "not found"


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = parse_qs(self.rfile.read(length).decode()) if length else {}
        status, location, body = self.server.fake.handle(method, self.path, form)
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        data = body.encode()
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Served:
    url: str
    fake: FakeWebShop
    server: ThreadingHTTPServer

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve(fake: FakeWebShop | None = None) -> Served:
    """Start the fake on a free 127.0.0.1 port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.fake = fake or FakeWebShop()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    host, port = server.server_address[:2]
    return Served(f"http://{host}:{port}", server.fake, server)  # type: ignore[attr-defined]


@pytest.fixture
def shop() -> Iterator[Served]:
    served = serve()
    yield served
    served.stop()


@pytest.fixture
def client(shop: Served) -> Iterator[WebShopClient]:
    with WebShopClient(shop.url, timeout=5) as c:
        yield c


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- client protocol -----------------------------------------------------------------------------


def test_reset_opens_the_fixed_session_of_a_goal(shop: Served, client: WebShopClient) -> None:
    page = client.reset(1)
    assert shop.fake.requests[-1][:2] == ("GET", "/fixed_1")
    assert page.kind == "search" and page.has_search_bar and not page.done
    assert page.instruction == GOALS[1]["instruction"]
    assert page.actions() == ["search[<keywords>]"]  # the search button is no click action
    assert "not text" not in page.observation()  # scripts are not page text
    assert client.instruction(2) == GOALS[2]["instruction"]
    assert client.page is page  # reading another goal's instruction leaves the episode alone


def test_search_posts_the_form_and_follows_the_redirect(
    shop: Served, client: WebShopClient
) -> None:
    client.reset(0)
    page = client.search("  Red   Cotton ")
    assert shop.fake.requests[-2] == ("POST", "/fixed_0", {"search_query": ["Red Cotton"]})
    assert page.kind == "results" and page.keywords == ("red", "cotton")
    assert page.page_number == 1 and page.instruction == GOALS[0]["instruction"]
    labels = [c.label for c in page.clickables]
    assert labels == ["Back to Search", "Next >", "B000TSHIRT", "B000TSHIRB"]
    obs = page.observation()
    assert "Search results for 'red cotton', page 1." in obs
    assert "[B000TSHIRT]\nRed cotton t-shirt, crew neck\n$12.99" in obs
    assert "click[Next >]" in obs and GOALS[0]["instruction"] not in obs

    nxt = client.click("next")
    assert nxt.page_number == 2
    assert [c.label for c in nxt.clickables] == ["Back to Search", "< Prev", "B000SOCKSX"]
    assert client.click("< prev").page_number == 1


def test_a_purchase_with_options_reads_the_reward(shop: Served, client: WebShopClient) -> None:
    client.reset(0)
    client.search("red t-shirt")
    item = client.click("b000tshirt")  # ASINs click in any case
    assert item.kind == "item" and item.asin == "B000TSHIRT" and item.options == {}
    obs = item.observation()
    assert "size\n[small] [medium] [large]\ncolor\n[red] [navy]" in obs
    assert "options chosen: none" in obs
    item = client.click("Large")
    item = client.step("click[color: red]")
    assert item.options == {"size": "large", "color": "red"}
    assert "options chosen: size=large, color=red" in item.observation()

    sub = client.click("Description")
    assert sub.kind == "sub_page" and sub.sub_page == "Description"
    assert len(sub.observation(max_chars=500)) < 800 and "... (cut)" in sub.observation(500)
    back = client.click("back")
    assert back.kind == "item" and back.options == {"size": "large", "color": "red"}

    done = client.click("Buy Now")
    assert done.done and client.done and done.reward == client.reward == 1.0
    assert done.actions() == [] and "The episode is over." in done.observation()
    assert done.observation() == (
        "Purchase done: product B000TSHIRT, reward 1.0.\nThe episode is over."
    )
    assert done.lines[0] == "Thank you for shopping with us!"
    with pytest.raises(InvalidWebShopAction, match="episode is over"):
        client.search("more shirts")


def test_options_without_data_url_are_built_from_the_route() -> None:
    served = serve(FakeWebShop(data_url=False))
    try:
        with WebShopClient(served.url, timeout=5) as c:
            c.reset(2)
            c.search("pens")
            c.click("B000PENSXX")
            assert c.click("24").options == {"pack": "24"}
            assert c.click("Buy Now").reward == 1.0
    finally:
        served.stop()


def test_wrong_product_gets_the_servers_lower_reward(client: WebShopClient) -> None:
    client.reset(0)
    client.search("socks")
    item = client.click("B000SOCKSX")
    assert "< Back to Results" in [c.label for c in item.clickables]
    assert client.click("prev").kind == "results"  # paging words match the arrow buttons
    client.click("B000SOCKSX")
    done = client.click("buy now")
    assert done.reward == pytest.approx(0.1)
    text = "\n".join(done.lines)  # the hidden goal and reward details never reach the text
    assert "B000TSHIRT" not in text and GOALS[0]["instruction"] not in text
    assert "Reward Details" not in text and "Your score" in text


def test_bad_actions_say_what_the_page_offers(client: WebShopClient) -> None:
    with pytest.raises(InvalidWebShopAction, match=r"reset\(goal_index\)"):
        client.click("Buy Now")
    client.reset(0)
    with pytest.raises(InvalidWebShopAction, match="empty"):
        client.search("   ")
    client.search("cotton")
    with pytest.raises(InvalidWebShopAction, match=r"not clickable.*B000TSHIRT") as info:
        client.click("B999")
    assert info.value.action == "B999"
    with pytest.raises(InvalidWebShopAction, match="not an action"):
        client.step("jump[up]")
    assert client.step("search[water bottle]").keywords == ("water", "bottle")


def test_ambiguous_option_values_ask_for_the_option_name() -> None:
    html_text = (
        '<div id="instruction-text"><h4>Instruction: <br>x</h4></div>'
        '<input type="radio" name="size" value="1" data-url="/a"><label>1</label>'
        '<input type="radio" name="pack" value="1" data-url="/b"><label>1</label>'
    )
    url = "http://h/item_page/fixed_0/B1/%5B%27x%27%5D/1/%7B%7D"
    page = parse_page(url, html_text, "http://h")
    with pytest.raises(InvalidWebShopAction, match="'size: 1', 'pack: 1'"):
        page.find("1")
    assert page.find("pack: 1").url == "http://h/b"


def test_a_goal_past_the_servers_list_is_a_server_error(client: WebShopClient) -> None:
    with pytest.raises(WebShopError, match="goal 7") as info:
        client.reset(7)
    assert not isinstance(info.value, WebShopUnavailable)
    with pytest.raises(ValueError, match="goal_index"):
        client.reset(-1)


# -- unavailable servers -------------------------------------------------------------------------


def test_no_url_configured_says_how_to_start_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WEBSHOP_URL_ENV, raising=False)
    with pytest.raises(WebShopUnavailable, match=r"web_agent_site\.app.*WEBSHOP_URL"):
        resolve_webshop_url()
    with pytest.raises(WebShopUnavailable, match="no WebShop server is configured"):
        WebShopEnvironment()
    with pytest.raises(WebShopUnavailable, match="http://"):
        resolve_webshop_url("localhost:3000")
    monkeypatch.setenv(WEBSHOP_URL_ENV, "http://127.0.0.1:3000/")
    assert resolve_webshop_url() == "http://127.0.0.1:3000"


def test_a_server_that_does_not_answer_is_unavailable() -> None:
    env = WebShopEnvironment(_closed_port_url(), timeout=2)
    with pytest.raises(WebShopUnavailable, match="cannot reach") as info:
        env.tasks(limit=1)
    assert info.value.url.startswith("http://127.0.0.1:")
    with pytest.raises(WebShopUnavailable):
        env.start(Task(id="webshop-0", query="q", meta={"goal_index": 0}))


def test_a_server_that_is_not_webshop_is_unavailable() -> None:
    served = serve(FakeWebShop(webshop=False))
    try:
        with pytest.raises(WebShopUnavailable, match="instruction-text"):
            WebShopClient(served.url, timeout=5).reset(0)
    finally:
        served.stop()


# -- environment ---------------------------------------------------------------------------------


def _tools(env: WebShopEnvironment) -> dict[str, Any]:
    return {t.name: t for t in env.tools().interactor}


def test_tasks_are_goals_with_their_instructions(shop: Served) -> None:
    env = WebShopEnvironment(shop.url, goal_indices=range(3), timeout=5)
    tasks = env.tasks(limit=2)
    assert [t.id for t in tasks] == ["webshop-0", "webshop-1"]
    assert [t.query for t in tasks] == [g["instruction"] for g in GOALS[:2]]
    assert tasks[1].meta == {"goal_index": 1, "session_id": "fixed_1"}
    assert env.metric_names == ("score", "success") and env.name == "webshop"
    n = len(shop.fake.requests)
    env.tasks(limit=2)
    assert len(shop.fake.requests) == n  # instructions are read once


def test_an_episode_through_the_tools_is_scored_by_the_reward(shop: Served) -> None:
    env = WebShopEnvironment(shop.url, goal_indices=[0, 2], timeout=5)
    tools = _tools(env)
    assert set(tools) == {"webshop_search", "webshop_click"}
    assert set(tools["webshop_click"].args) == {"target"}
    assert "no WebShop episode is open" in tools["webshop_search"].invoke({"query": "shirt"})

    task = env.tasks()[0]
    env.start(task)
    obs = tools["webshop_search"].invoke({"query": "red t-shirt"})
    assert "[B000TSHIRT]" in obs and "Available actions:" in obs
    assert "Product B000TSHIRT" in tools["webshop_click"].invoke({"target": "B000TSHIRT"})
    tools["webshop_click"].invoke({"target": "large"})
    assert "reward 0.6666" in tools["webshop_click"].invoke({"target": "click[Buy Now]"})
    assert "episode is over" in tools["webshop_click"].invoke({"target": "red"})
    env.finish(task)
    outcome = env.score(task, answer="whatever the agent says")
    assert outcome.score == pytest.approx(2 / 3) and not outcome.success
    assert outcome.metrics == {"score": pytest.approx(2 / 3), "success": 0.0}

    pens = env.tasks()[1]
    env.start(pens)
    tools["webshop_search"].invoke({"query": "blue gel pens"})
    tools["webshop_click"].invoke({"target": "B000PENSXX"})
    tools["webshop_click"].invoke({"target": "pack: 24"})
    tools["webshop_click"].invoke({"target": "Buy Now"})
    outcome = env.score(pens, None)  # before finish: read from the open episode
    env.finish(pens)
    assert outcome.success and outcome.score == 1.0 and env.score(pens, None) == outcome


def test_an_episode_without_a_purchase_scores_zero(shop: Served) -> None:
    env = WebShopEnvironment(shop.url, goal_indices=[1], timeout=5)
    task = env.tasks()[0]
    with pytest.raises(ValueError, match="never started"):
        env.score(task, None)
    env.start(task)
    _tools(env)["webshop_search"].invoke({"query": "bottle"})
    env.finish(task)
    outcome = env.score(task, "B000BOTTLE")
    assert outcome.score == 0.0 and not outcome.success
    assert outcome.metrics == {"score": 0.0, "success": 0.0}


def test_tools_answer_failures_as_text(shop: Served) -> None:
    env = WebShopEnvironment(shop.url, goal_indices=[0], timeout=2)
    search, click = _tools(env)["webshop_search"], _tools(env)["webshop_click"]
    task = env.tasks()[0]
    env.start(task)
    assert search.invoke({"query": " "}).startswith("Error: the query is empty")
    reply = click.invoke({"target": "Buy Now"})
    assert reply.startswith("Error:") and "not clickable" in reply
    search.invoke({"query": "shirt"})
    shop.stop()  # the server goes away mid-episode
    reply = click.invoke({"target": "B000TSHIRT"})
    assert reply.startswith("Error: the shop failed") and "cannot reach" in reply
    env.finish(task)
    assert env.score(task, None).score == 0.0


def test_bad_goal_indices_are_rejected(shop: Served) -> None:
    with pytest.raises(ValueError, match="goal_indices"):
        WebShopEnvironment(shop.url, goal_indices=[0, -2])
    env = WebShopEnvironment(shop.url, goal_indices=[0])
    with pytest.raises(ValueError, match="goal_index"):
        env.start(Task(id="x", query="q"))
