"""The dashboard's GPU-use parts: a running gang's utilisation cell and, per gang, a rank view.

Apart from ``html`` because they exist only when the scheduler reads GPU metrics
(``gpuMetrics`` in its config): without them the page is as it was. The rank view draws one
bar per rank, as tall as its GPUs are busy, so an idle rank (no bar), a straggler (a short one
in a row of tall ones) and a missing rank (a gap with a dashed outline) stand out before any
number is read; each bar's title and the caption under it say the same in words.
"""

from __future__ import annotations

from html import escape

from scheduler.model.numerals import is_digits
from scheduler.report.utilisation import GangUse
from scheduler.views.state import GangRow, use_text

STYLE = """
.ranks { display: flex; gap: 3px; align-items: flex-end; height: 48px; margin: .3rem 0 .1rem; }
.rank { width: 18px; position: relative; height: 100%; background: #f1f1f4;
        border-radius: 2px; }
.rank > .bar { position: absolute; bottom: 0; left: 0; right: 0; background: #2ca02c;
               border-radius: 2px; }
.rank.straggler > .bar { background: #ff7f0e; }
.rank.idle { outline: 2px solid #d62728; outline-offset: -2px; }
.rank.unseen { background: repeating-linear-gradient(45deg, #eee 0 3px, #fff 3px 6px); }
.rank.missing { background: #fff; border: 2px dashed #d62728; box-sizing: border-box; }
.ranknums { display: flex; gap: 3px; font-size: .65rem; color: #555; }
.ranknums > span { width: 18px; text-align: center; }
.use-flag { color: #b45309; }
.gang-use { margin: .2rem 0 1rem; }
"""

_WORDS = {"idle": "idle", "straggler": "lags the gang", "unseen": "no GPU series",
          "missing": "missing: no running pod"}


def measured(rows: tuple[GangRow, ...]) -> bool:
    """Does any running gang carry GPU use (the scheduler reads GPU metrics)?"""
    return any(g.use is not None for g in rows)


def use_cell(g: GangRow) -> str:
    """A running gang's mean utilisation and idle GPUs, in the running table."""
    text = use_text(g)
    flag = " use-flag" if text != "-" and g.use is not None and g.use.flagged else ""
    return f"<td class='n use{flag}'>{escape(text)}</td>"


def _bars(use: GangUse) -> tuple[str, str]:
    """The bars and the rank numbers under them, missing ranks in their place."""
    ranks = [(r.rank, r.flag, r.utilisation) for r in use.ranks]
    ranks += [(m, "missing", None) for m in use.missing]
    if ranks and all(is_digits(r) for r, _, _ in ranks):
        ranks.sort(key=lambda r: int(r[0]))
    bars, nums = [], []
    for rank, flag, util in ranks:
        pct = 0.0 if util is None else max(0.0, min(1.0, util)) * 100
        said = f"{pct:.0f}%" if util is not None else "no figure"
        title = f"rank {rank}: {said}" + (f", {_WORDS[flag]}" if flag else "")
        bar = f"<div class='bar' style='height:{pct:.0f}%'></div>" if util is not None else ""
        cls = f"rank {flag}" if flag else "rank"
        bars.append(f"<div class='{cls}' data-rank='{escape(rank)}' "
                    f"title='{escape(title)}'>{bar}</div>")
        nums.append(f"<span>{escape(rank)}</span>")
    return "".join(bars), "".join(nums)


def section(rows: tuple[GangRow, ...], labels: dict[str, str]) -> str:
    """Each running gang with GPU use: its ranks as bars, flagged gangs first."""
    gangs = [g for g in rows if g.use is not None and g.use.ranks]
    if not gangs:
        return "<p id='gpu-use'>No GPU series for any running gang yet.</p>"
    gangs.sort(key=lambda g: (not g.use.flagged if g.use else True, g.id))
    out = ["<div id='gpu-use'><div class='legend'><span><span class='cell' "
           "style='background:#2ca02c'></span>busy (bar height: utilisation)</span>"
           "<span><span class='cell' style='background:#ff7f0e'></span>straggler</span>"
           "<span><span class='cell' style='outline:2px solid #d62728'></span>idle</span>"
           "<span><span class='cell' style='border:2px dashed #d62728'></span>missing</span>"
           "</div>"]
    for g in gangs:
        use = g.use
        assert use is not None
        bars, nums = _bars(use)
        mean = "-" if use.utilisation is None else f"{use.utilisation * 100:.0f}%"
        words = escape(use.summary) if use.summary else "every rank busy"
        cls = "use-flag" if use.flagged else "meta"
        out.append(f"<div class='gang-use' data-gang='{escape(g.id)}'>"
                   f"<strong>{escape(labels[g.id])}</strong> "
                   f"<span class='meta'>({escape(g.queue)}, {use.allocated} GPUs, mean {mean})"
                   f"</span><div class='ranks'>{bars}</div><div class='ranknums'>{nums}</div>"
                   f"<div class='{cls}'>{words}</div></div>")
    out.append("</div>")
    return "\n".join(out)
