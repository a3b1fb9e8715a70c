# SPDX-License-Identifier: MIT
"""Rich outputs: a raw MIME bundle from a sandbox, hostile or real (matplotlib's PNG, a
pandas table), checked into a ``Bundle`` (``_model/rich.py`` and its checks).  The SVG's
own tests are in ``test_rich_svg.py``."""

from __future__ import annotations

import json
import pickle
import struct
import subprocess
import sys
import time
import zlib
from typing import Any

import pytest
from support.figures import figure_bytes
from support.timing import slow

import pysandbox
from pysandbox import Bundle
from pysandbox._model.rich import MAX_TYPES, MIME_TYPES, BundleRefused, checked_bundle
from pysandbox._model.rich_checks import MAX_HTML_DEPTH

pytestmark = pytest.mark.no_bwrap

MB = 1 << 20


@pytest.fixture(scope="module")
def png() -> bytes:
    return figure_bytes("png")


@pytest.fixture(scope="module")
def jpeg() -> bytes:
    return figure_bytes("jpeg")


def _kept(mime: str, data: bytes | str, max_bytes: int = 8 * MB) -> bytes | str | None:
    """What a bundle of ``mime`` alone keeps of ``data``, or None when it is dropped."""
    bundle = checked_bundle({mime: data}, max_bytes=max_bytes)
    return None if bundle is None else bundle[mime]


# The bundle: its shape, order and immutability


def test_a_bundle_keeps_the_known_types_in_a_notebooks_order_and_drops_others(png: bytes) -> None:
    raw: dict[str, bytes | str] = {
        "text/plain": "<Figure>",
        "application/x-evil": "data",
        "application/json": '{"a": [1, 2.5]}',
        "image/png": png,
    }
    bundle = checked_bundle(raw, max_bytes=MB)
    assert bundle is not None
    assert list(bundle) == ["image/png", "application/json", "text/plain"]
    assert list(MIME_TYPES[:3]) == ["image/png", "image/jpeg", "image/svg+xml"]
    assert bundle["image/png"] == png and bundle["text/plain"] == "<Figure>"
    assert "application/x-evil" not in bundle
    assert bundle.dropped == ("'application/x-evil': not a MIME type pysandbox shows",)


def test_a_bundle_cannot_be_changed_and_hashes_by_its_items(png: bytes) -> None:
    bundle = Bundle({"image/png": png, "application/json": "[1, 2]"}, max_bytes=MB)
    with pytest.raises(TypeError):
        bundle["text/plain"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        bundle._data = {}  # type: ignore[misc]
    value = bundle.json()
    value.append(3)
    assert bundle.json() == [1, 2] and bundle["application/json"] == "[1,2]"
    same = Bundle({"application/json": "[1,2]", "image/png": png}, max_bytes=MB)
    assert same == bundle and hash(same) == hash(bundle) and len({same, bundle}) == 1
    assert bundle == {"image/png": png, "application/json": "[1,2]"}
    assert bundle != Bundle({"image/png": png}, max_bytes=MB)


def test_the_repr_is_short_whatever_the_data() -> None:
    bundle = Bundle({"text/plain": "x" * MB, "image/gif": "GIF89a"}, max_bytes=4 * MB)
    assert repr(bundle) == f"Bundle(text/plain: {MB} chars, 1 dropped)"


def test_to_json_is_display_datas_data_and_from_json_checks_it_again(png: bytes) -> None:
    raw = {"image/png": png, "application/json": '{"k": [1, null]}', "text/plain": "hi"}
    bundle = Bundle(raw, max_bytes=MB)
    shown = bundle.to_json()
    assert shown["application/json"] == {"k": [1, None]} and shown["text/plain"] == "hi"
    assert shown == bundle._repr_mimebundle_()
    text = json.dumps(shown)
    assert Bundle.from_json(json.loads(text), max_bytes=MB) == bundle
    hostile = {**shown, "text/html": "<b onclick='x()'>b</b>", "image/png": "!!!"}
    with pytest.raises(BundleRefused, match="invalid base64"):
        Bundle.from_json(hostile, max_bytes=MB)
    hostile["image/png"] = shown["image/png"]
    assert Bundle.from_json(hostile, max_bytes=MB)["text/html"] == "<b>b</b>"


def test_a_bundle_pickles_as_it_is(png: bytes) -> None:
    bundle = Bundle({"image/png": png, "text/gif": "x"}, max_bytes=MB)
    pickled = pickle.dumps(bundle)
    again = pickle.loads(pickled)
    assert again == bundle and again.dropped == bundle.dropped and type(again) is Bundle
    assert pickled.count(b"pysandbox._") == 0  # pysandbox.Bundle, not its module
    forged = pickled.replace(b"image/png", b"image/gif")
    with pytest.raises(BundleRefused, match="pickled bundle holds 'image/gif'"):
        pickle.loads(forged)


def test_bundle_is_public_and_loads_no_checker_on_import() -> None:
    assert pysandbox.Bundle is Bundle and Bundle.__module__ == "pysandbox"
    assert "Bundle" in pysandbox.__all__
    loaded = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys, pysandbox._model.rich as r; r.Bundle({'text/plain': 'x'});"
            "print(' '.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not {"nh3", "pyexpat", "xml.parsers.expat", "json", "zlib"} & set(loaded)


# Refused whole: the wrong shape, types or size


@pytest.mark.parametrize(
    "raw",
    [
        [("text/plain", "x")],
        "text/plain",
        None,
        {b"text/plain": "x"},
        {"text/plain": 3},
        {"text/plain": ["x"]},
        {"image/png": bytearray(b"\x89PNG")},
        {"text/plain": "x", 7: "y"},
    ],
    ids=["list", "str", "none", "bytes-key", "int-value", "list-value", "bytearray", "int-key"],
)
def test_a_bundle_of_the_wrong_types_is_refused_whole(raw: object) -> None:
    with pytest.raises(BundleRefused) as caught:
        checked_bundle(raw, max_bytes=MB)
    assert isinstance(caught.value, ValueError)


def test_a_dict_subclass_is_read_through_dicts_own_methods() -> None:
    class Lying(dict):  # type: ignore[type-arg]
        def items(self) -> Any:
            return iter([("text/plain", "fine")])

        def __len__(self) -> int:
            return 1

    with pytest.raises(BundleRefused, match="data must be bytes or str"):
        checked_bundle(Lying({"text/plain": 3}), max_bytes=MB)
    with pytest.raises(BundleRefused, match="MIME types"):
        checked_bundle(Lying({f"a/{n}": "" for n in range(MAX_TYPES + 1)}), max_bytes=MB)


def test_too_many_types_are_refused() -> None:
    raw = {f"application/x-{n}": "" for n in range(MAX_TYPES + 1)}
    with pytest.raises(BundleRefused, match="MIME types"):
        checked_bundle(raw, max_bytes=MB)
    del raw["application/x-0"]
    assert checked_bundle(raw, max_bytes=MB) is None


def test_a_bundle_over_max_bytes_is_refused_counting_utf8_bytes() -> None:
    with pytest.raises(BundleRefused, match="more than 1000 bytes"):
        checked_bundle({"text/plain": "x" * 1001}, max_bytes=1000)
    # 400 characters, 790 bytes of UTF-8 (the key's 10 included).
    with pytest.raises(BundleRefused, match=r"holds 790 bytes \(at most 700\)"):
        checked_bundle({"text/plain": "é" * 390}, max_bytes=700)
    assert checked_bundle({"text/plain": "é" * 340}, max_bytes=700) is not None


def test_a_bundle_that_grows_past_max_bytes_when_made_safe_is_refused() -> None:
    with pytest.raises(BundleRefused, match="once made safe"):
        checked_bundle({"text/markdown": "<" * 100}, max_bytes=200)


def test_nothing_left_is_none_and_wrong_data_types_are_dropped() -> None:
    raw = {"image/png": "not bytes", "text/plain": b"bytes", "text/html": "\ud800"}
    assert checked_bundle(raw, max_bytes=MB) is None
    bundle = Bundle(raw, max_bytes=MB)
    assert not bundle and len(bundle.dropped) == 3
    assert "data must be bytes, not str" in bundle.dropped[0]
    assert "lone surrogate" in bundle.dropped[2]


# Images


def test_a_real_png_is_kept(png: bytes) -> None:
    assert _kept("image/png", png) == png


def _with_ihdr(png: bytes, width: int, height: int) -> bytes:
    """``png`` with its IHDR's size changed and its CRC made right again."""
    ihdr = b"IHDR" + struct.pack(">II", width, height) + png[24:29]
    return png[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + png[33:]


def test_a_png_claiming_a_billion_pixels_a_side_is_dropped(png: bytes) -> None:
    assert _kept("image/png", _with_ihdr(png, 1000, 800)) is not None
    for width, height in [(10**9, 10**9), (16385, 10), (10, 0)]:
        assert _kept("image/png", _with_ihdr(png, width, height)) is None, (width, height)


def test_a_truncated_or_forged_png_is_dropped(png: bytes) -> None:
    assert _kept("image/png", png[: len(png) // 2]) is None
    assert _kept("image/png", png[:-12]) is None  # no IEND
    assert _kept("image/png", png + b"<script>") is None
    # A chunk whose length field claims 4 GiB: compared with what is there, not allocated.
    assert _kept("image/png", png[:33] + b"\xff\xff\xff\xffIDAT" + png[41:]) is None
    assert _kept("image/png", png[:28] + bytes([png[28] ^ 1]) + png[29:]) is None  # IHDR CRC
    assert _kept("image/png", b"GIF89a" + png[6:]) is None


def test_a_real_jpeg_is_kept_and_html_posing_as_one_is_dropped(jpeg: bytes) -> None:
    assert _kept("image/jpeg", jpeg) == jpeg
    assert _kept("image/jpeg", b"<html><script>alert(1)</script></html>") is None
    assert _kept("image/jpeg", b"\xff\xd8\xff<script>alert(1)</script>\xff\xd9") is None
    assert _kept("image/jpeg", jpeg[: len(jpeg) // 2]) is None
    # After the first segment (APP0), a segment without its FF, then 65 fill bytes.
    after = 4 + struct.unpack(">H", jpeg[4:6])[0]
    assert _kept("image/jpeg", jpeg[:after] + b"\xe1\x00\x04AB" + jpeg[after:]) is None
    assert _kept("image/jpeg", jpeg[:after] + b"\xff" * 3 + jpeg[after:]) == (
        jpeg[:after] + b"\xff" * 3 + jpeg[after:]
    )
    assert _kept("image/jpeg", jpeg[:after] + b"\xff" * 65 + jpeg[after:]) is None
    sof = next(i for i in range(2, len(jpeg)) if jpeg[i - 1] == 0xFF and jpeg[i] == 0xC0)
    huge = jpeg[: sof + 4] + struct.pack(">HH", 60000, 60000) + jpeg[sof + 8 :]
    assert _kept("image/jpeg", huge) is None


# HTML


def test_a_pandas_table_keeps_its_table_and_loses_its_style_sheet() -> None:
    pandas = pytest.importorskip("pandas")
    html = pandas.DataFrame({"a": [1, 2], "b": ["<x>", "y"]})._repr_html_()
    kept = _kept("text/html", html)
    assert isinstance(kept, str)
    for tag in ("<div>", '<table border="1" class="dataframe">', "<thead>", "<tbody>"):
        assert tag in kept, tag
    assert kept.count("<tr>") == 3 and kept.count("<th>") == 5 and kept.count("<td>") == 4
    assert "<td>&lt;x&gt;</td>" in kept
    assert "<style" not in kept and "vertical-align" not in kept and "style=" not in kept


@pytest.mark.parametrize(
    ("html", "kept"),
    [
        ("<b>bold</b><script>alert(1)</script>", "<b>bold</b>"),
        ("<img src=x onerror=alert(1)>", "<img>"),
        ('<a href="javascript:alert(1)">x</a>', '<a rel="noopener noreferrer nofollow">x</a>'),
        (
            '<a href="https://example.org/" target="_blank" rel="opener">x</a>',
            '<a href="https://example.org/" rel="noopener noreferrer nofollow">x</a>',
        ),
        ('<a href="/api/contents">x</a>', '<a rel="noopener noreferrer nofollow">x</a>'),
        ('<a href="data:text/html,x">x</a>', '<a rel="noopener noreferrer nofollow">x</a>'),
        ('<img src="https://example.org/track.png">', "<img>"),
        ('<img src="data:image/png;base64,iVBO">', '<img src="data:image/png;base64,iVBO">'),
        ('<img src="data:image/svg+xml;base64,PHN2Zz4=">', "<img>"),
        ("<style>body{display:none}</style><p>t</p>", "<p>t</p>"),
        ('<div style="position:fixed" onclick="x()" id="main">t</div>', "<div>t</div>"),
        ("<iframe src='https://example.org'></iframe><p>t</p>", "<p>t</p>"),
        ("<!-- a comment --><svg onload=alert(1)><p>t</p></svg>", "<p>t</p>"),
    ],
)
def test_hostile_html_is_cleaned(html: str, kept: str) -> None:
    assert _kept("text/html", html) == kept


def test_html_nested_too_deep_is_dropped_before_it_is_parsed() -> None:
    fine = "<div>" * MAX_HTML_DEPTH + "x" + "</div>" * MAX_HTML_DEPTH
    assert _kept("text/html", fine) == fine
    deep = "<div>" * 100_000 + "x"
    started = time.monotonic()
    bundle = Bundle({"text/html": deep}, max_bytes=MB)
    assert time.monotonic() - started < slow(0.5)  # unchecked: 18 s and more
    assert not bundle and "nests 100000 tags deep" in bundle.dropped[0]
    # Stray end tags do not hide the depth.
    sneaky = "</div>" * 1000 + "<div>" * (MAX_HTML_DEPTH + 1)
    assert _kept("text/html", sneaky) is None


# Markdown, LaTeX, plain text


def test_markdown_has_its_html_and_script_links_neutralized() -> None:
    kept = _kept("text/markdown", "# T\n<script>alert(1)</script> a &lt; b")
    assert kept == "# T\n&lt;script>alert(1)&lt;/script> a &amp;lt; b"
    kept = _kept("text/markdown", "[x](JavaScript:alert(1)) [y](vbscript\\:x) javascripts:")
    assert kept == "[x](JavaScript\u200b:alert(1)) [y](vbscript\u200b\\:x) javascripts:"


def test_markdown_shows_no_image_a_browser_would_fetch() -> None:
    kept = _kept("text/markdown", "![leak](https://example.org/t.png?k=secret) [ok](https://x.org)")
    assert kept == "!\\[leak](https://example.org/t.png?k=secret) [ok](https://x.org)"
    assert _kept("text/markdown", "\\![a][r]") == "\\!\\[a][r]"


def test_latex_with_mathjax_links_or_html_is_dropped() -> None:
    assert _kept("text/latex", r"$\frac{a}{b} + \hat{x}$") == r"$\frac{a}{b} + \hat{x}$"
    for command in (r"\href{javascript:alert(1)}{x}", r"\require{html}", r"\class{x}{y}"):
        assert _kept("text/latex", f"$a {command}$") is None, command


def test_plain_text_is_kept_as_it_is() -> None:
    assert _kept("text/plain", "<script>\x1b[31m") == "<script>\x1b[31m"


# JSON


def test_json_is_kept_compact() -> None:
    assert _kept("application/json", '{ "a" : [1, 2.5, "é"] }') == '{"a":[1,2.5,"é"]}'


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep"),
        ('{"a": NaN}', "NaN is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ("[1e400]", "not finite"),
        ("[123456789012345678901234567890]", "out of range"),
        ("{'a': 1}", "Expecting property name"),
        ("[1,", "Expecting value"),
    ],
    ids=["nested", "nan", "infinity", "overflow", "bigint", "python", "truncated"],
)
def test_json_that_is_deep_not_finite_or_not_json_is_dropped(text: str, reason: str) -> None:
    started = time.monotonic()
    bundle = Bundle({"application/json": text}, max_bytes=MB)
    assert time.monotonic() - started < slow(0.5)
    assert not bundle and reason in bundle.dropped[0], bundle.dropped


def test_a_json_nesting_within_the_bound_is_kept() -> None:
    value: Any = "leaf"
    for _ in range(31):
        value = [value]
    assert _kept("application/json", json.dumps(value)) == json.dumps(value).replace(" ", "")
