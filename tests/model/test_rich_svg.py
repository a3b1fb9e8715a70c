# SPDX-License-Identifier: MIT
"""SVG in a rich output (``_model/rich_svg.py``): matplotlib's figure survives with its
drawing, and a hostile SVG loses its scripts, handlers, foreign content and external
links, or is dropped whole (a DTD of its own, entities, too deep, too many elements)."""

from __future__ import annotations

import re
import time

import pytest
from support.figures import figure_bytes
from support.timing import slow

from pysandbox import Bundle
from pysandbox._model.rich import checked_bundle
from pysandbox._model.rich_svg import MAX_DEPTH, MAX_ELEMENTS, clean_svg

pytestmark = pytest.mark.no_bwrap

MB = 1 << 20
HEAD = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'


def _svg(body: str) -> str:
    return f"{HEAD}{body}</svg>"


def _kept(svg: str) -> str | None:
    bundle = checked_bundle({"image/svg+xml": svg}, max_bytes=8 * MB)
    if bundle is None:
        return None
    kept = bundle["image/svg+xml"]
    assert isinstance(kept, str)
    return kept


@pytest.fixture(scope="module", params=["path", "none"])
def figure_svg(request: pytest.FixtureRequest) -> str:
    """A real matplotlib figure, its text drawn as paths (the default) or written as
    text in ``style``'d elements."""
    return figure_bytes("svg", fonttype=request.param).decode("utf-8")


def _tags(svg: str) -> list[str]:
    return re.findall(r"<([A-Za-z]+)", svg)


def test_matplotlibs_svg_keeps_its_drawing(figure_svg: str) -> None:
    kept = _kept(figure_svg)
    assert kept is not None
    assert "<!DOCTYPE" in figure_svg and "<!DOCTYPE" not in kept
    dropped = {"metadata", "rdf", "cc", "dc"}  # the figure's metadata: <rdf:RDF>, ...
    assert [t for t in _tags(figure_svg) if t not in dropped] == _tags(kept)
    for part in ("<path", "<defs>", "<clipPath", '<use xlink:href="#', "<image", "style="):
        assert kept.count(part) == figure_svg.count(part) > 0, part
    assert 'clip-path="url(#' in kept and '<style type="text/css">*{' in kept
    assert 'xlink:href="data:image/png;base64,' in kept
    if "<text" in figure_svg:  # svg.fonttype none: the words are there, escaped
        assert "Tïtle" in kept and "x &lt; y &amp; z" in kept
        assert kept.count("font") == figure_svg.count("font") > 0
    assert kept.startswith('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink=')
    # Written out anew: the same document, so cleaning it again changes nothing.
    assert clean_svg(kept) == kept


@pytest.mark.parametrize(
    ("body", "kept"),
    [
        ("<script>alert(1)</script><rect/>", "<rect></rect>"),
        ('<rect onclick="alert(1)" onload="x()" width="2"/>', '<rect width="2"></rect>'),
        (
            '<foreignObject><body xmlns="http://www.w3.org/1999/xhtml"><script>x()</script>'
            "</body></foreignObject><circle/>",
            "<circle></circle>",
        ),
        ('<a xlink:href="javascript:alert(1)"><rect/></a>', ""),
        ('<use xlink:href="javascript:alert(1)"/>', "<use></use>"),
        ('<use href="https://example.org/x.svg#a"/>', "<use></use>"),
        ('<image xlink:href="https://example.org/t.png"/>', "<image></image>"),
        ('<image href="data:image/svg+xml;base64,PHN2Zz4="/>', "<image></image>"),
        ('<image href="data:image/png;base64,iVBO!"/>', "<image></image>"),
        (
            '<image href="data:image/png;base64,iVBORw=="/>',
            '<image href="data:image/png;base64,iVBORw=="></image>',
        ),
        ('<rect style="fill: url(https://example.org/t)"/>', "<rect></rect>"),
        ("<rect style=\"fill: url( '#g')\"/>", "<rect style=\"fill: url( '#g')\"></rect>"),
        ('<rect fill="url(http://example.org/#g)"/>', "<rect></rect>"),
        ("<rect style=\"background: image-set('t.png' 1x)\"/>", "<rect></rect>"),
        ('<rect style="fill: u\\72l(http://x)"/>', "<rect></rect>"),
        ("<style>@import 'https://example.org/t.css';</style>", "<style></style>"),
        ("<style>*{font-size: 0}</style>", "<style></style>"),
        ("<style>body{display:none}</style>", "<style></style>"),
        ("<style>p::before{content:'Run this'}</style>", "<style></style>"),
        ("<style>.a{fill:red}/*}*/</style>", "<style></style>"),
        (
            "<style>.a, #b > path{fill: red; stroke: url(#g)}</style>",
            "<style>.a, #b &gt; path{fill: red; stroke: url(#g)}</style>",
        ),
        ('<rect style="position: fixed; fill: red"/>', "<rect></rect>"),
        ('<rect style="fill: red/* a comment */"/>', "<rect></rect>"),
        ("<rect fill=\"image('https://example.org/t.png')\"/>", "<rect></rect>"),
        ("<style>input[value^=a]{fill:red}</style>", "<style></style>"),
        ('<rect style="fill: red; width: 100vw"/>', "<rect></rect>"),
        (
            "<rect style=\"font: 10px 'DejaVu Sans'; fill: #fff; stroke-width: 0.8;\"/>",
            "<rect style=\"font: 10px 'DejaVu Sans'; fill: #fff; stroke-width: 0.8;\"></rect>",
        ),
        ("<style>u<g/>rl(https://example.org/t)</style>", "<style></style>"),
        ('<set attributeName="href" to="javascript:alert(1)"/>', ""),
        ('<animate attributeName="href" values="javascript:alert(1)"/>', ""),
        (
            "<rect/><!-- comment --><?xml-stylesheet href='https://example.org/t.css'?>",
            "<rect></rect>",
        ),
        (
            '<g id="a" data-x="1" xml:space="preserve"><text>a&lt;b</text></g>',
            '<g id="a" xml:space="preserve"><text>a&lt;b</text></g>',
        ),
    ],
)
def test_hostile_svg_is_rebuilt_without_it(body: str, kept: str) -> None:
    assert _kept(_svg(body)) == _svg(kept)


def test_svg_onload_and_transform_on_the_root_are_dropped() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" width="4" '
        'transform="translate(-900 -900) scale(90)"><rect transform="scale(2)"/></svg>'
    )
    kept = _kept(svg)
    assert kept == HEAD[:-1] + ' width="4"><rect transform="scale(2)"></rect></svg>'
    assert kept is not None and "onload" not in kept


XXE = """<?xml version="1.0"?>
<!DOCTYPE svg [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<svg xmlns="http://www.w3.org/2000/svg"><text>&xxe;</text></svg>"""
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "lol">'
    + "".join(f'<!ENTITY {chr(98 + n)} "{("&" + chr(97 + n) + ";") * 10}">' for n in range(9))
    + ']><svg xmlns="http://www.w3.org/2000/svg"><text>&j;</text></svg>'
)


@pytest.mark.parametrize(
    ("svg", "reason"),
    [
        (XXE, "an entity declaration"),
        (LAUGHS, "an entity declaration"),
        (
            '<!DOCTYPE svg [<!ATTLIST svg onload CDATA "alert(1)">]>'
            '<svg xmlns="http://www.w3.org/2000/svg"/>',
            "a DTD of its own",
        ),
        ('<!DOCTYPE html SYSTEM "x"><svg xmlns="http://www.w3.org/2000/svg"/>', "DTD of its own"),
        (_svg("<text>&nbsp;</text>"), "undefined entity"),
        ('<html xmlns="http://www.w3.org/1999/xhtml"><svg/></html>', "not an <svg> element"),
        ("<svg><rect></svg>", "mismatched tag"),
        ("", "no element found"),
    ],
    ids=["xxe", "laughs", "attlist", "not-svg-dtd", "undeclared", "not-svg", "broken", "empty"],
)
def test_dtds_entities_and_broken_documents_are_dropped(svg: str, reason: str) -> None:
    bundle = Bundle({"image/svg+xml": svg, "text/plain": "fig"}, max_bytes=MB)
    assert list(bundle) == ["text/plain"]
    assert bundle.dropped[0].startswith("image/svg+xml") and reason in bundle.dropped[0]


def test_ten_thousand_levels_are_refused_quickly_without_recursion() -> None:
    fine = _svg("<g>" * (MAX_DEPTH - 1) + "</g>" * (MAX_DEPTH - 1))
    assert _kept(fine) == fine
    deep = _svg("<g>" * 10_000 + "</g>" * 10_000)
    started = time.monotonic()
    bundle = Bundle({"image/svg+xml": deep}, max_bytes=MB)
    assert time.monotonic() - started < slow(0.3)
    assert not bundle and f"deeper than {MAX_DEPTH}" in bundle.dropped[0]


def test_too_many_elements_are_refused() -> None:
    assert _kept(_svg("<rect/>" * (MAX_ELEMENTS - 1))) is not None
    bundle = Bundle({"image/svg+xml": _svg("<rect/>" * MAX_ELEMENTS)}, max_bytes=8 * MB)
    assert not bundle and f"more than {MAX_ELEMENTS} elements" in bundle.dropped[0]
