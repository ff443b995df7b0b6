"""`verity explorer`: the routes. Each page is server-rendered from named sections; its `/events` stream
(server-sent events) sends a section again whenever its HTML changed, and the page's script swaps it in place.

    /                       network overview          /events
    /job/{id}               one job                   /job/{id}/events
    /node/{address}         one node                  /node/{address}/events
    /job/{id}/model         model card + verify check
    /job/{id}/model.safetensors   the final model (verified against the chain when it is read)
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
import threading
import time
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from verity.errors import VerityError
from verity.explorer import DEFAULT_PORT, data, source  # noqa: F401 — DEFAULT_PORT: callers find it here too
from verity.explorer.charts import curve_svg
from verity.node.statedir import node_names

POLL_S = 1.0        # how often a stream looks at the chain head
REFRESH_S = 10.0    # a stream re-renders at least this often (clocks, last seen) even when no event arrived
PING_S = 15.0       # an SSE comment keeps idle connections open through proxies


def points(metrics, attr: str) -> list[tuple[int, float]]:
    """(round shown to people, value) of each finished round that has the value."""
    return [(m.round + 1, getattr(m, attr)) for m in metrics if getattr(m, attr) is not None]


def digest(html: str) -> str:
    return hashlib.sha1(html.encode()).hexdigest()[:12]


def vrt(wei: int) -> str:
    return f"{wei / 1e18:,.2f}"


class Explorer:
    """The chain and storage the pages read, node names, and the per-job readers (their caches: metrics, events)."""

    def __init__(self, chain, storage, names: dict[str, str] | None = None, state_dir: Path | None = None,
                 workdir: Path | None = None, poll_s: float = POLL_S, refresh_s: float = REFRESH_S):
        self.chain, self.storage, self.state_dir = chain, storage, state_dir
        self.fixed_names = dict(names or {})
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="verity-explorer-"))
        self.poll_s, self.refresh_s = poll_s, refresh_s
        self._readers: dict[int, tuple] = {}
        self._models: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self.env = Environment(loader=PackageLoader("verity.explorer", "templates"),
                               autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(vrt=vrt, node=self.node_html, ago=data.ago)
        self.env.globals.update(curve_svg=curve_svg, points=points)

    # ------------------------------------------------------------------------------------------------ names
    def names(self) -> dict[str, str]:
        out = node_names(self.state_dir)
        out.update(self.fixed_names)
        return {k.lower(): v for k, v in out.items()}

    def node_html(self, address: str, link: bool = True) -> str:
        """A node as people read it: its full name where known (never cut short), linked to its page."""
        from markupsafe import Markup, escape

        if not address or not int(address, 16):
            return Markup('<span class="muted">(nobody)</span>')
        name = self.names().get(address.lower())
        label = escape(name) if name else Markup(f'<code class="addr">{escape(address)}</code>')
        if not link:
            return Markup(label)
        return Markup(f'<a class="node" href="/node/{escape(address)}" title="{escape(address)}">{label}</a>')

    # ---------------------------------------------------------------------------------------------- readers
    def reader(self, job_id: int):
        from verity.job.view import JobReader

        with self._lock:
            if job_id not in self._readers:
                self._readers[job_id] = (JobReader(self.chain, self.storage, job_id), threading.Lock())
            return self._readers[job_id]

    # --------------------------------------------------------------------------------------------- sections
    def _render(self, template: str, **ctx) -> str:
        return self.env.get_template(template).render(**ctx)

    def overview_sections(self) -> dict[str, str]:
        return self.render_overview(data.overview(self.chain))

    def job_sections(self, job_id: int) -> dict[str, str]:
        reader, lock = self.reader(job_id)
        with lock:
            page = data.job_page(reader)
        return self.render_job(page)

    def node_sections(self, address: str) -> dict[str, str]:
        return self.render_node(data.node_page(self.chain, address))

    def render_overview(self, ov) -> dict[str, str]:
        """section id -> HTML; the page shows them in this order and its stream resends the ones that changed."""
        return {"s-summary": self._render("_summary.html", ov=ov), "s-nodes": self._render("_nodes.html", ov=ov),
                "s-jobs": self._render("_jobs.html", ov=ov), "s-recent": self._render("_recent.html", ov=ov)}

    def render_job(self, page) -> dict[str, str]:
        r = page.report
        return {"s-jobhead": self._render("_jobhead.html", p=page, r=r),
                "s-tasks": self._render("_tasks.html", p=page, r=r),
                "s-curves": self._render("_curves.html", r=r),
                "s-disputes": self._render("_disputes.html", trails=page.trails),
                "s-money": self._render("_money.html", p=page)}

    def render_node(self, page) -> dict[str, str]:
        name = self.names().get(page.address.lower())
        return {"s-nodehead": self._render("_nodehead.html", p=page, s=page.status, name=name),
                "s-earnings": self._render("_earnings.html", p=page, s=page.status),
                "s-nodedisputes": self._render("_nodedisputes.html", p=page),
                "s-nodetasks": self._render("_nodetasks.html", p=page)}

    def model(self, job_id: int):
        """(ModelPage, bytes): read and verified once per job when its model exists."""
        reader, lock = self.reader(job_id)
        with lock:
            cached = self._models.get(job_id)
            if cached is None or not cached[0].ready:
                cached = self._models[job_id] = data.model_page(reader, self.workdir)
            return cached

    # ---------------------------------------------------------------------------------------------- the app
    def page(self, template: str, title: str, sections: dict[str, str], events: str, **ctx) -> HTMLResponse:
        query = ",".join(f"{k}:{digest(v)}" for k, v in sections.items())
        html = self._render(template, title=title, sections=sections, events=f"{events}?h={query}", **ctx)
        return HTMLResponse(html)

    async def stream(self, request: Request, build) -> StreamingResponse:
        """Server-sent events: `fragment` {id, html} for each section whose HTML differs from what the page has."""
        have = dict(p.split(":", 1) for p in request.query_params.get("h", "").split(",") if ":" in p)

        async def events():
            yield "event: hello\ndata: {}\n\n"
            seen_events, head, built, pinged = -1, -1, 0.0, time.monotonic()
            while not await request.is_disconnected():
                now = time.monotonic()
                new_head = await run_in_threadpool(source.head_block, self.chain)
                if new_head != head or now - built >= self.refresh_s:
                    head = new_head
                    count = await run_in_threadpool(source.event_count, self.chain)
                    if count != seen_events or now - built >= self.refresh_s:
                        seen_events, built = count, now
                        try:
                            sections = await run_in_threadpool(build)
                        except VerityError as exc:
                            yield f"event: problem\ndata: {json.dumps(str(exc))}\n\n"
                            sections = {}
                        for sid, html in sections.items():
                            d = digest(html)
                            if have.get(sid) != d:
                                have[sid] = d
                                yield f"event: fragment\ndata: {json.dumps({'id': sid, 'html': html})}\n\n"
                if now - pinged >= PING_S:
                    pinged = now
                    yield ": ping\n\n"
                await asyncio.sleep(self.poll_s)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def app(self) -> Starlette:
        async def home(request):
            sections = await run_in_threadpool(self.overview_sections)
            return self.page("overview.html", "network", sections, "/events")

        async def home_events(request):
            return await self.stream(request, self.overview_sections)

        async def job(request):
            jid = request.path_params["job_id"]
            sections = await run_in_threadpool(self.job_sections, jid)
            return self.page("job.html", f"job {jid}", sections, f"/job/{jid}/events", job_id=jid)

        async def job_events(request):
            jid = request.path_params["job_id"]
            return await self.stream(request, lambda: self.job_sections(jid))

        async def node(request):
            addr = _address(request.path_params["address"])
            sections = await run_in_threadpool(self.node_sections, addr)
            title = self.names().get(addr.lower()) or addr
            return self.page("node.html", f"node {title}", sections, f"/node/{addr}/events", address=addr)

        async def node_events(request):
            addr = _address(request.path_params["address"])
            return await self.stream(request, lambda: self.node_sections(addr))

        async def model(request):
            jid = request.path_params["job_id"]
            page, _ = await run_in_threadpool(self.model, jid)
            html = self._render("model.html", title=f"job {jid} model", m=page, job_id=jid)
            return HTMLResponse(html)

        async def model_file(request):
            jid = request.path_params["job_id"]
            page, blob = await run_in_threadpool(self.model, jid)
            if blob is None:
                return Response(f"job {jid} has no final model yet ({page.status})\n", status_code=404)
            return Response(blob, media_type="application/octet-stream",
                            headers={"Content-Disposition": f'attachment; filename="job-{jid}-model.safetensors"'})

        async def failed(request, exc):
            code = 404 if isinstance(exc, LookupError) else 400
            html = self._render("error.html", title="not found" if code == 404 else "error", message=str(exc))
            return HTMLResponse(html, status_code=code)

        static = Path(__file__).with_name("static")
        return Starlette(routes=[
            Route("/", home), Route("/events", home_events),
            Route("/job/{job_id:int}", job), Route("/job/{job_id:int}/events", job_events),
            Route("/job/{job_id:int}/model", model), Route("/job/{job_id:int}/model.safetensors", model_file),
            Route("/node/{address}", node), Route("/node/{address}/events", node_events),
            Mount("/static", StaticFiles(directory=static), name="static"),
        ], exception_handlers={VerityError: failed, ValueError: failed})


class BadAddress(VerityError, ValueError):
    def __init__(self, text: str):
        super().__init__(f"{text!r} is not a node address (0x and 40 hex digits)")


def _address(text: str) -> str:
    from web3 import Web3

    if not Web3.is_address(text):
        raise BadAddress(text)
    return Web3.to_checksum_address(text)


def create_app(chain, storage, **kwargs) -> Starlette:
    return Explorer(chain, storage, **kwargs).app()
