"""Chapter 3: the four steps of attention for one query, on section 3.1's hand-sized example
(``ch03_one_query.svg``): score, scale, softmax, weighted sum of the values."""
from __future__ import annotations

import math

from .ch03_positions import keep_spaces
from .svg import ROLES, Figure

DESC = (
    "Attention for one query, query 0 of section 3.1's hand-sized example (T = 3 tokens, "
    "d_k = d_v = 2). Step 1: the query q_0 = (2, 0) is scored against every key, s_0j = q_0 . k_j, "
    "giving 2, 0 and 2 for the keys (1, 0), (0, 1) and (1, 1). Step 2: each score is divided by "
    "sqrt(d_k) = sqrt(2), giving 1.41, 0 and 1.41. Step 3: a softmax over j turns them into "
    "weights a_0j = 0.45, 0.11 and 0.45, which sum to 1. Step 4: the values v_j = (1, 0), (0, 1) "
    "and (1, 1) are multiplied by their weights and summed: z_0 = (0.89, 0.55)."
)
Q0 = (2.0, 0.0)  # cell 4's Q3[0]
KEYS = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))  # K3
VALUES = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))  # V3
ROW_Y = (120, 185, 250)  # the top of each key's row
H = 34  # row box height
COLS = {"key": 20, "score": 190, "scale": 335, "weight": 510, "value": 655, "z": 838}
W = {"key": 125, "score": 110, "scale": 140, "weight": 110, "value": 150, "z": 156}


def vec(v: tuple[float, ...]) -> str:
    return "(" + ", ".join(f"{x:.2f}".rstrip("0").rstrip(".") if x == int(x) else f"{x:.2f}"
                           for x in v) + ")"


def draw() -> Figure:
    fig = Figure("ch03_one_query", 1000, 380,
                 "Chapter 3: attention for one query, in four steps", DESC)
    fig.text(30, 28, "One query, four steps: query 0 of section 3.1's example (T = 3, d_{k} = d_{v} = 2)",
             "title", anchor="start")
    d_k = len(Q0)
    scores = [sum(q * k for q, k in zip(Q0, key)) for key in KEYS]
    scaled = [s / math.sqrt(d_k) for s in scores]
    exps = [math.exp(s) for s in scaled]
    weights = [e / sum(exps) for e in exps]
    z = tuple(sum(a * v[c] for a, v in zip(weights, VALUES)) for c in range(len(VALUES[0])))

    heads = (("key", "keys k_{j}"), ("score", "1. score s_{0j} = q_{0} · k_{j}"),
             ("scale", "2. scale: ÷ √d_{k}"), ("weight", "3. softmax over j"),
             ("value", "4. values v_{j}, times a_{0j}"))
    for col, label in heads:
        fig.text(COLS[col], 100, label, "note", anchor="start")
    # the query, fed to every score
    fig.tensor(COLS["score"], 46, f"q_{{0}} = {vec(Q0)}", "query", w=125)
    fig.line([(COLS["score"] - 18, 60), (COLS["score"] - 18, ROW_Y[-1] + H / 2)], "query", arrow=False)
    fig.line([(COLS["score"], 60), (COLS["score"] - 18, 60)], "query", arrow=False)
    for j, y in enumerate(ROW_Y):
        mid = y + H / 2
        fig.tensor(COLS["key"], y + 3, f"k_{{{j}}} = {vec(KEYS[j])}", "key", w=W["key"])
        fig.line([(COLS["key"] + W["key"] + 2, mid), (COLS["score"] - 2, mid)], "key")
        fig.line([(COLS["score"] - 18, mid), (COLS["score"] - 2, mid)], "query")
        fig.rect(COLS["score"], y, W["score"], H, "module", rx=4)
        fig.text(COLS["score"] + W["score"] / 2, mid + 5, f"s_{{0{j}}} = {scores[j]:.0f}", "math")
        fig.line([(COLS["score"] + W["score"] + 2, mid), (COLS["scale"] - 2, mid)], "weights")
        fig.rect(COLS["scale"], y, W["scale"], H, "module", rx=4)
        fig.text(COLS["scale"] + W["scale"] / 2, mid + 5, f"{scores[j]:.0f} / √2 = {scaled[j]:.2f}", "math")
        fig.line([(COLS["scale"] + W["scale"] + 2, mid), (COLS["weight"] - 2, mid)], "weights")
        fig.rect(COLS["weight"], y, W["weight"], H, fill=ROLES["weights"][0], stroke="#FFFFFF",
                 extra=f'fill-opacity="{weights[j] * 0.9:.2f}"')
        fig.text(COLS["weight"] + W["weight"] / 2, mid + 5, f"a_{{0{j}}} = {weights[j]:.2f}", "math")
        fig.line([(COLS["weight"] + W["weight"] + 2, mid), (COLS["value"] - 2, mid)], "weights")
        fig.tensor(COLS["value"], y + 3, f"{weights[j]:.2f} × {vec(VALUES[j])}", "value", w=W["value"])
        fig.line([(COLS["value"] + W["value"] + 2, mid), (COLS["z"] - 22, mid), (COLS["z"] - 22, ROW_Y[1] + H / 2),
                  (COLS["z"] - 2, ROW_Y[1] + H / 2)], "value", arrow=j == 1)
    fig.text(COLS["z"] + 20, ROW_Y[1] - 8, "Σ_{j} a_{0j} v_{j}", "math", anchor="start")
    fig.tensor(COLS["z"], ROW_Y[1] + 3, f"z_{{0}} = {vec(tuple(round(c, 2) for c in z))}", "context", w=W["z"])
    fig.text(COLS["weight"] + W["weight"] / 2, ROW_Y[-1] + H + 20, f"sum: {sum(weights):.2f}", "note")
    fig.text(20, 330, "Every query i does the same with its own q_{i}; stacking the rows gives "
             "Z = softmax(Q K^{T} / √d_{k}) V (Figure 3.2), "
             + fig.code("scaled_dot_product_attention", "attnbook.layers.scaled_dot_product_attention")
             + ".", "note", anchor="start")
    fig.legend(20, 362, ["query", "key", "value", "weights", "context"])
    return keep_spaces(fig)
