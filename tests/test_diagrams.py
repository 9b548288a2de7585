"""The architecture diagrams cannot drift from their script or from the library they draw.

- ``python -m tools.diagrams`` (``tools/diagrams/``, run from the repository root) writes exactly
  the committed ``chapters/figures/*.svg``;
- each SVG is well-formed XML with a title, a description (alt text) and a viewBox, is small,
  and loads nothing from outside (it must render offline);
- every library name drawn in a figure (``Figure.lib``) exists: classes and functions are
  imported, instance attributes (``Class:attr``) are looked up on a tiny instance;
- every figure a chapter embeds exists.
"""
import json
import re
import xml.etree.ElementTree as ET
from importlib import import_module
from pathlib import Path

import pytest
from torch import nn

from tools import diagrams
from tools.diagrams import svg

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "chapters" / "figures"
SVG = "{http://www.w3.org/2000/svg}"


# Modules of chapters still on their own branches (BERT, ViT): their figures are drawn already. While
# a module is missing, names in it are skipped; once it is merged, they are checked like the rest.
PENDING_MODULES: tuple[str, ...] = ()


def pending(path: str) -> bool:
    module = next((m for m in PENDING_MODULES if path.startswith(m + ".")), None)
    if module is None:
        return False
    try:
        import_module(module)
    except ModuleNotFoundError:
        return True
    return False


def tiny_instances() -> dict:
    """One small instance of each library class whose attributes a figure names."""
    from attnbook.layers import CausalBlock, DecoderBlock, Embeddings, EncoderBlock, MultiHeadAttention
    from attnbook.layers.scores import AdditiveScore
    from attnbook.models.rnn import AttentionDecoder, ContextDecoder, GRUEncoder
    from attnbook.models.gpt import GPT, GPTConfig
    from attnbook.models.transformer import Transformer, TransformerConfig

    instances = {
        "attnbook.layers.MultiHeadAttention": MultiHeadAttention(8, 2),
        "attnbook.layers.EncoderBlock": EncoderBlock(8, 2, 16),
        "attnbook.layers.DecoderBlock": DecoderBlock(8, 2, 16),
        "attnbook.layers.CausalBlock": CausalBlock(8, 2, 16),
        "attnbook.layers.Embeddings": Embeddings(nn.Embedding(10, 8), None),
        "attnbook.layers.scores.AdditiveScore": AdditiveScore(4, 8, 3),
        "attnbook.models.rnn.GRUEncoder": GRUEncoder(10, 4, 4),
        "attnbook.models.rnn.ContextDecoder": ContextDecoder(10, 4, 8, 4),
        "attnbook.models.rnn.AttentionDecoder": AttentionDecoder(10, 4, 8, 4, AdditiveScore(4, 8, 3)),
        "attnbook.models.transformer.Transformer": Transformer(TransformerConfig(
            10, 10, d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1)),
        "attnbook.models.gpt.GPT": GPT(GPTConfig(10, max_len=8, d_model=8, num_heads=2, d_ff=16, num_layers=1)),
    }
    if not pending("attnbook.models.bert.Bert"):
        from attnbook.models.bert import Bert, BertConfig
        instances["attnbook.models.bert.Bert"] = Bert(BertConfig(
            vocab_size=10, d_model=8, num_layers=1, num_heads=2, d_ff=16, max_len=8))
    if not pending("attnbook.layers.patches.PatchEmbedding"):
        from attnbook.layers.patches import PatchEmbedding
        instances["attnbook.layers.patches.PatchEmbedding"] = PatchEmbedding(1, 2, 8)
    return instances


def resolve(path: str, instances: dict) -> object:
    """``attnbook.x.Name.attr`` by import and getattr; ``attnbook.x.Class:attr`` on a tiny instance."""
    owner, _, attribute = path.partition(":")
    parts = owner.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module prefix
        try:
            obj = import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        break
    if attribute:
        if owner not in instances:
            raise KeyError(f"no tiny instance of {owner} to look up {attribute!r} on; add one to tiny_instances")
        return getattr(instances[owner], attribute)
    return obj


@pytest.fixture(scope="module")
def figures():
    return diagrams.build()


def test_generator_writes_exactly_the_committed_files(tmp_path):
    diagrams.main([str(tmp_path)])
    written = {p.name: p.read_bytes() for p in tmp_path.glob("*.svg")}
    committed = {p.name: p.read_bytes() for p in FIGURES.glob("*.svg")}
    assert sorted(written) == sorted(committed), "run `python -m tools.diagrams` and commit the result"
    stale = [name for name in written if written[name] != committed[name]]
    assert not stale, f"committed figures differ from the script's output: {stale}"


def test_generator_is_deterministic(figures):
    again = diagrams.build()
    assert {n: f.render() for n, f in figures.items()} == {n: f.render() for n, f in again.items()}


@pytest.mark.parametrize("path", sorted(FIGURES.glob("*.svg")), ids=lambda p: p.name)
def test_svg_is_self_contained_with_alt_text(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.encode()) < 30_000, f"{path.name} is {len(text.encode())} bytes; keep figures under 30 KB"
    root = ET.fromstring(text)  # well-formed XML
    assert root.tag == f"{SVG}svg"
    assert re.fullmatch(r"0 0 \d+ \d+", root.get("viewBox", "")), "the figure needs a viewBox"
    title, desc = root.find(f"{SVG}title"), root.find(f"{SVG}desc")
    assert title is not None and title.text and title.text.strip()
    assert desc is not None and len(desc.text or "") >= 100, "the description is the alt text: say what is drawn"
    assert root.find(f".//{SVG}image") is None and "@import" not in text and "@font-face" not in text
    links = [v for el in root.iter() for k, v in el.attrib.items() if k.endswith("href")]
    assert all(link.startswith("#") for link in links), f"external links: {links}"
    urls = re.findall(r"url\(([^)]*)\)", text)
    assert all(u.startswith("#") for u in urls), f"external urls: {urls}"
    assert root.findall(f".//{SVG}text"), "text must stay text"


def test_every_figure_names_library_objects_that_exist(figures):
    instances = tiny_instances()
    missing = {}
    for name, fig in figures.items():
        assert fig.lib, f"{name} draws no library name"
        for path in sorted(fig.lib):
            if pending(path):
                continue
            try:
                resolve(path, instances)
            except (AttributeError, KeyError, ModuleNotFoundError) as err:
                missing.setdefault(name, []).append(f"{path}: {err}")
    assert not missing, f"figures name things the library does not have: {missing}"


def test_the_name_check_can_fail():
    instances = tiny_instances()
    with pytest.raises(AttributeError):
        resolve("attnbook.layers.NoSuchBlock", instances)
    with pytest.raises(AttributeError):
        resolve("attnbook.layers.EncoderBlock:cross_attn", instances)  # only DecoderBlock has one
    with pytest.raises(KeyError):
        resolve("attnbook.layers.FeedForward:linear1", instances)  # no tiny instance registered
    assert isinstance(resolve("attnbook.layers.DecoderBlock:cross_attn", instances), nn.Module)


def test_labels_drawn_are_the_recorded_names(figures):
    """A name recorded for the test must also be drawn, so the two cannot part ways."""
    for name, fig in figures.items():
        svg = re.sub(r"<(title|desc)\b.*?</\1>", "", fig.render(), flags=re.S)  # drawn text only
        for path in fig.lib:
            owner, _, attribute = path.partition(":")
            shown = attribute or owner.rsplit(".", 1)[-1]
            assert shown in svg, f"{name} records {path} but does not draw {shown!r}"


def test_chapters_embed_only_figures_that_exist():
    referenced = set()
    for notebook in sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                referenced |= set(re.findall(r"figures/([\w.-]+\.svg)", "".join(cell["source"])))
    missing = sorted(name for name in referenced if not (FIGURES / name).exists())
    assert not missing, f"chapters embed figures that do not exist: {missing}"


def test_a_label_too_long_for_its_box_is_an_error():
    fig = svg.Figure("probe", 200, 100, "probe", "probe")
    fig.box(10, 10, 120, 30, "EncoderBlock")  # fits
    with pytest.raises(ValueError, match="does not fit"):
        fig.box(10, 10, 60, 30, "MultiHeadAttention")


def test_sub_and_superscripts_become_tspans_and_text_is_escaped():
    assert svg.rich("s_{i-1}") == 's<tspan dy="4" font-size="75%">i-1</tspan>'
    assert svg.rich("W^{Q} x") == 'W<tspan dy="-6" font-size="75%">Q</tspan><tspan dy="6"> x</tspan>'
    assert svg.rich("<bos> & <eos>") == "&lt;bos&gt; &amp; &lt;eos&gt;"
    # a superscript right after a subscript stacks above it (x_p^i, not x_p followed by ^i)
    stacked = svg.rich("x_{p}^{i} E")
    assert 'dx="-0.55em" dy="-10" font-size="75%">i<' in stacked and 'dx="0.3em" dy="6"> E<' in stacked
    assert "dx" not in svg.rich("x_{p} y^{i}")


@pytest.mark.parametrize("number", ["01", "02", "03", "04", "05"])
def test_chapters_1_to_5_each_show_their_architecture_figure(number):
    notebook = next((ROOT / "chapters").glob(f"{number}_*.ipynb"))
    markdown = "".join("".join(c["source"]) for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                       if c["cell_type"] == "markdown")
    images = re.findall(rf"!\[([^\]]+)\]\(figures/(ch{number}_[\w-]+\.svg)\)", markdown)
    assert images, f"{notebook.name} embeds no figures/ch{number}_*.svg as ![alt](path)"
    for alt, _ in images:
        assert len(alt) >= 60, f"{notebook.name}: alt text too short to describe the figure: {alt!r}"


def test_running_outside_the_repository_without_a_folder_fails_clearly(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert diagrams.main([]) == 2
    assert "repository root" in capsys.readouterr().err
