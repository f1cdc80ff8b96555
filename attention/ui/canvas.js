// The canvas heatmap: a figure from attention/charts/canvas.py. Kinds "cells" and "blocks"
// are panels side by side, each a canvas showing one image (a pixel a cell or a block) scaled
// up without smoothing, with the numbers it is given printed on it; "row" is two step lines
// over every key; "bars" one bar a key, each its own colour; "grid" is every head of a model
// in one image, a click picking a head. Axis labels, titles, legends and tooltips are DOM
// text set through textContent only (a token is never markup). A figure with the same
// `layout` as the last one keeps every element: only the canvases are repainted (and, for
// cells, the labels rewritten when they changed). A figure may carry a heading and notes,
// drawn above it as a subheader and captions would be (`header`).
// While images decode, the root carries data-pending (tests and benches wait on it); after,
// data-drawn.

const roots = new WeakMap();     // parentElement -> {root, layout, version, panels, tip}
const images = new Map();        // PNG digest -> decoded ImageBitmap (a few recent ones)
const KEPT_IMAGES = 24;
let pageFont = null;             // the app's font family, read from the page once
let rowWidth = 680;              // px: a row figure's plot width, as last measured

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// A packed figure (attention/charts/canvas.py `pack`): "AEF1", the JSON's length (uint32,
// little-endian), the JSON, then the panels' PNGs; each panel's image becomes its bytes.
function unpack(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = view.getUint32(4, true);
  const data = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + size)));
  for (const panel of data.panels) {
    const [offset, length] = panel.image.png;
    panel.image = { id: panel.image.id,
                    bytes: bytes.subarray(8 + size + offset, 8 + size + offset + length) };
  }
  return data;
}

// A canvas of width x height CSS px, backed at the screen's pixel ratio, named for readers.
function sizedCanvas(width, height, label) {
  const canvas = el("canvas"), ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  return canvas;
}

function tooltip() {
  const tip = el("div", "ae-tooltip");
  tip.setAttribute("role", "tooltip");
  return tip;
}

// An image decoded off the main thread (createImageBitmap), kept by its digest.
function decoded(image) {
  if (images.has(image.id)) return Promise.resolve(images.get(image.id));
  return createImageBitmap(new Blob([image.bytes], { type: "image/png" })).then((bitmap) => {
    images.set(image.id, bitmap);
    if (images.size > KEPT_IMAGES) {
      const [oldest, old] = images.entries().next().value;
      images.delete(oldest);
      old.close();
    }
    return bitmap;
  });
}

function fontSize(step) { return Math.max(7, Math.min(12, step * 0.6)); }

const LABEL_PX = 90;             // a token label's longest side; a longer one ends in "…"
let measurer = null;             // a 2D context that measures labels

// Whether a token label is longer than LABEL_PX at `size` px. Only such a label gets a clip
// (class ae-long): a clip or a transform on every label made each frame's compositing of a
// Model heads click about 2.5x slower (a paint chunk a label).
function tooLong(text, size) {
  measurer = measurer || document.createElement("canvas").getContext("2d");
  measurer.font = `${size}px ${pageFont}`;
  return measurer.measureText(text).width > LABEL_PX;
}

// Labels along one side of a panel: token labels centred on their cells (every k-th when
// they would overlap), or position ticks over 0..n (the end ones inside the panel). All sit
// in one grid cell, so the box is as wide (or tall) as its longest label. A token label is
// placed by its margin alone (its box is one line, `size` px across the axis); a tick, whose
// length varies, is shifted by a transform (a few a panel).
function axisLabels(axis, count, n, side, vertical) {
  const box = el("div", vertical ? "ae-ylabels" : "ae-xlabels");
  box.style[vertical ? "height" : "width"] = `${side}px`;   // labels past an end overflow
  const margin = vertical ? "marginTop" : "marginLeft";
  if (axis.labels) {
    const step = side / count, size = fontSize(step);
    const stride = Math.max(1, Math.ceil((size * 1.15) / step));
    axis.labels.forEach((text, i) => {
      if (i % stride) return;
      const label = el("span", tooLong(text, size) ? "ae-label ae-long" : "ae-label", text);
      label.style.fontSize = `${size}px`;
      label.style[margin] = `${(i + 0.5) * step - size / 2}px`;
      box.appendChild(label);
    });
  } else {
    axis.ticks.forEach((value) => {      // one near the end ends there (panels side by side)
      const label = el("span", "ae-label ae-tick", String(value));
      label.style[margin] = `${(value / n) * side}px`;
      label.style.setProperty("--shift", value === 0 ? "0%" : value / n > 0.95 ? "-100%" : "-50%");
      box.appendChild(label);
    });
  }
  return box;
}

// Tick labels at given offsets ([px, text] pairs) along a side `length` px long.
function tickLabels(items, length, vertical) {
  const box = el("div", vertical ? "ae-ylabels" : "ae-xlabels");
  box.style[vertical ? "height" : "width"] = `${length}px`;
  for (const [at, text] of items) {
    const label = el("span", "ae-label ae-tick", text);
    label.style[vertical ? "marginTop" : "marginLeft"] = `${at}px`;
    label.style.setProperty("--shift", at <= 0 ? "0%" : at >= length ? "-100%" : "-50%");
    box.appendChild(label);
  }
  return box;
}

function legendBar(spec, side) {
  const box = el("div", "ae-legend");
  box.appendChild(el("span", "ae-legend-title", spec.title));
  const bar = el("div", "ae-legend-bar");
  bar.style.width = `${side * 0.6}px`;
  bar.style.background = `linear-gradient(to right, ${spec.colors.join(", ")})`;
  const ticks = el("div", "ae-legend-ticks");
  for (const [at, text] of spec.ticks) {
    const tick = el("span", "ae-label", text);
    tick.style.left = `${at * 100}%`;
    ticks.appendChild(tick);
  }
  const scale = el("div", "ae-legend-scale");
  scale.append(bar, ticks);
  box.appendChild(scale);
  return box;
}

// Radio buttons above the panels (charts/canvas.py `choices`: a zoom window's sizes, the value
// every head shows), drawn like Streamlit's segmented control; a click sends the choices'
// event with its value (the rerun then draws that one).
function choiceButtons(state, choices) {
  const row = el("div", "ae-choices");
  row.setAttribute("role", "radiogroup");
  row.setAttribute("aria-label", choices.label);
  if (choices.help) row.title = choices.help;
  row.appendChild(el("span", "ae-choices-label", choices.label));
  const buttons = choices.options.map(([value, text]) => {
    const button = el("button", "ae-choice", text);
    button.type = "button";
    button.setAttribute("role", "radio");
    button.setAttribute("aria-checked", String(value === choices.current));
    button.addEventListener("click", () => {
      if (button.getAttribute("aria-checked") === "true") return;
      buttons.forEach((b) => b.setAttribute("aria-checked", String(b === button)));
      state.setTriggerValue(choices.event, value);
    });
    return button;
  });
  row.append(...buttons);
  return row;
}

// Build the panels' elements for a layout.
function build(state, data) {
  const { root } = state;
  root.replaceChildren();
  if (data.choices) root.appendChild(choiceButtons(state, data.choices));
  const side = data.panel;
  state.panels = data.panels.map((panel, i) => {
    const box = el("div", panel.current ? "ae-panel ae-current" : "ae-panel");
    const title = el("div", "ae-title", panel.title);   // another head's: `paint` sets them
    box.appendChild(title);
    let ylabels = null;
    if (i === 0) {
      box.appendChild(el("div", "ae-ytitle", data.y.title));
      ylabels = axisLabels(data.y, data.rows, data.n, side, true);
      box.appendChild(ylabels);
    }
    const plot = el("div", "ae-plot");
    const canvas = sizedCanvas(side, side, panel.title);
    const brush = el("div", "ae-brush");
    plot.append(canvas, brush);
    const legendSlot = el("div", "ae-legend-slot");
    const xlabels = axisLabels(data.x, data.cols, data.n, side, false);
    box.append(plot, xlabels, el("div", "ae-xtitle", data.x.title), legendSlot);
    root.appendChild(box);
    listen(state, canvas, brush, i);
    return { box, title, canvas, legendSlot, xlabels, ylabels };
  });
  state.tip = tooltip();
  root.appendChild(state.tip);
}

// Another window of the same shape: new token labels in the same elements' places.
function relabel(state, data) {
  const side = data.panel;
  for (const panel of state.panels) {
    for (const [name, axis, count, vertical] of [["xlabels", data.x, data.cols, false],
                                                 ["ylabels", data.y, data.rows, true]]) {
      if (!panel[name]) continue;
      const fresh = axisLabels(axis, count, data.n, side, vertical);
      panel[name].replaceWith(fresh);
      panel[name] = fresh;
    }
  }
}

// The cell (or block) under the pointer, in the figure's rows and columns.
function cellAt(state, canvas, event) {
  const r = canvas.getBoundingClientRect();
  const x = (event.clientX - r.left) / r.width, y = (event.clientY - r.top) / r.height;
  if (x < 0 || y < 0 || x >= 1 || y >= 1) return null;
  return { x, y, row: Math.floor(y * state.data.rows), col: Math.floor(x * state.data.cols) };
}

function tipLines(data, at) {
  const tip = data.tip, t = tip.titles;
  if (data.kind === "blocks") {
    const span = (i) => {
      const a = i * tip.size, b = Math.min(data.n, a + tip.size) - 1;
      return a === b ? `${a}` : `${a}–${b}`;
    };
    return [[t.query_pos, span(at.row)], [t.key_pos, span(at.col)]];
  }
  const first = Object.keys(tip.digits)[0];
  if (tip.values[first][at.row][at.col] === null) return null;    // masked: nothing there
  const lines = [[t.query_token, tip.query_tokens[at.row]], [t.query_pos, tip.q0 + at.row],
                 [t.key_token, tip.key_tokens[at.col]], [t.key_pos, tip.k0 + at.col]];
  for (const [name, digits] of Object.entries(tip.digits)) {
    const value = tip.values[name][at.row][at.col];
    if (value !== null) lines.push([t[name], value.toFixed(digits)]);
  }
  return lines;
}

function showTip(state, event, lines) {
  const tip = state.tip;
  if (!lines) { tip.style.display = "none"; return; }
  tip.replaceChildren(...lines.map(([key, value]) => {
    const line = el("div", "ae-tip-line");
    line.append(el("span", "ae-tip-key", key), el("span", "ae-tip-value", String(value)));
    return line;
  }));
  tip.style.display = "block";
  const room = window.innerWidth - event.clientX;
  tip.style.left = `${event.clientX + (room < 260 ? -250 : 14)}px`;
  tip.style.top = `${event.clientY + 14}px`;
}

// Pointer handlers of one panel: the tooltip, and on an overview a box to drag.
function listen(state, canvas, brush, index) {
  let start = null;
  canvas.addEventListener("pointermove", (event) => {
    const at = cellAt(state, canvas, event);
    if (start) {
      const r = canvas.getBoundingClientRect();
      const x = Math.min(Math.max(event.clientX - r.left, 0), r.width);
      const y = Math.min(Math.max(event.clientY - r.top, 0), r.height);
      Object.assign(brush.style, {
        display: "block", left: `${Math.min(x, start.x)}px`, top: `${Math.min(y, start.y)}px`,
        width: `${Math.abs(x - start.x)}px`, height: `${Math.abs(y - start.y)}px` });
      start.end = { x, y, width: r.width, height: r.height };
    }
    showTip(state, event, at && tipLines(state.data, at));
  });
  canvas.addEventListener("pointerleave", () => { state.tip.style.display = "none"; });
  canvas.addEventListener("pointerdown", (event) => {
    if (!state.data.brush) return;
    const r = canvas.getBoundingClientRect();
    start = { x: event.clientX - r.left, y: event.clientY - r.top };
    canvas.setPointerCapture(event.pointerId);
  });
  canvas.addEventListener("pointerup", () => {
    const drag = start;
    start = null;
    brush.style.display = "none";
    if (!drag || !drag.end) return;
    const { x, y, width, height } = drag.end;
    if (Math.abs(x - drag.x) < 3 && Math.abs(y - drag.y) < 3) return;   // a click, no box
    const n = state.data.n;
    const keys = [drag.x, x].map((v) => (v / width) * n).sort((a, b) => a - b);
    const queries = [drag.y, y].map((v) => (v / height) * n).sort((a, b) => a - b);
    state.setTriggerValue("brush", { query_start: queries, key_start: keys, panel: index });
  });
}

function paint(state, panel, image, index) {
  const data = state.data, { box, title, canvas } = state.panels[index];
  if (title.textContent !== panel.title) title.textContent = panel.title;
  box.classList.toggle("ae-current", !!panel.current);
  const ctx = canvas.getContext("2d"), s = canvas.width / data.panel;
  ctx.setTransform(s, 0, 0, s, 0, 0);
  ctx.clearRect(0, 0, data.panel, data.panel);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(image, 0, 0, data.panel, data.panel);
  const sx = data.panel / data.cols, sy = data.panel / data.rows;
  if (panel.numbers) {
    // ".37" fits a cell at 0.55 of its width; a longer label (".0049") gets a smaller font
    const longest = Math.max(3, ...panel.numbers.map((row) => Math.max(0, ...row.map((t) => t.length))));
    ctx.font = `${Math.min(10, sx * 0.55, (sx * 1.65) / longest)}px ${pageFont}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    panel.numbers.forEach((row, i) => row.forEach((text, j) => {
      if (!text) return;
      ctx.fillStyle = panel.dark[i][j] ? "#ffffff" : "#1f2430";
      ctx.fillText(text, (j + 0.5) * sx, (i + 0.5) * sy);
    }));
  }
  if (data.box) {
    const [q0, q1, k0, k1] = data.box, unit = data.panel / data.n;
    ctx.strokeStyle = "#e4572e";
    ctx.lineWidth = 2;
    ctx.strokeRect(k0 * unit, q0 * unit, Math.max(2, (k1 - k0) * unit), Math.max(2, (q1 - q0) * unit));
  }
  const slot = state.panels[index].legendSlot, legend = JSON.stringify(panel.legend);
  if (slot.dataset.legend !== legend) {          // another head often has the same ticks
    slot.replaceChildren(...(panel.legend ? [legendBar(panel.legend, data.panel)] : []));
    slot.dataset.legend = legend;
  }
}

// ---- one query over every key: two step lines (kind "row") ----

// A row figure is as wide as its column, measured by a ResizeObserver after the browser's own
// layout: reading clientWidth while building forced a style recalculation of the whole page
// inside React's commit (25 ms of a view change, in a Chrome trace). A width other than the
// one built with rebuilds the figure before it is painted on screen.
function observeRowWidth(state) {
  if (state.observer) return;
  state.observer = new ResizeObserver((entries) => {
    const column = entries[0].contentRect.width;
    if (!column) return;                          // taken off the page (another view): keep
    rowWidth = Math.max(320, Math.round(column) - 80);
    if (state.row && state.data.kind === "row" && state.row.width !== rowWidth) {
      buildRow(state, state.data);
      paintRow(state);
      scrollHint(state, state.data.scroll_hint, true);   // the rebuild emptied the figure
      header(state, state.data);
    }
  });
  state.observer.observe(state.root.parentElement);
}

function buildRow(state, data) {
  const { root } = state;
  root.replaceChildren();
  observeRowWidth(state);
  const width = rowWidth;
  const height = data.height, n = data.n;
  const title = el("div", "ae-row-title", "");           // the query; set on every paint
  const legend = el("div", "ae-row-legend");
  for (const series of data.series) {
    const swatch = el("span", "ae-swatch");
    swatch.style.background = series.color;
    const item = el("span", "ae-row-item");
    item.append(swatch, el("span", null, series.name));
    legend.appendChild(item);
  }
  const box = el("div", "ae-row-box");
  const plot = el("div", "ae-plot");
  const canvas = sizedCanvas(width, height, data.series.map((s) => s.name).join(" / "));
  const guide = el("div", "ae-guide");
  plot.append(canvas, guide);
  const xs = data.x.ticks.map((t) => [((t + 0.5) / n) * width, String(t)]);
  const ys = data.y.ticks.map((t) => [height - t * height, String(t)]);
  box.append(el("div", "ae-ytitle", data.y.title), tickLabels(ys, height, true), plot,
             tickLabels(xs, width, false), el("div", "ae-xtitle", data.x.title));
  state.tip = tooltip();
  root.append(title, legend, box, state.tip);
  state.row = { canvas, guide, width, height, title };
  canvas.addEventListener("pointermove", (event) => {
    const d = state.data, r = canvas.getBoundingClientRect();
    const k = Math.floor(((event.clientX - r.left) / r.width) * d.n);
    const scaled = d.series[0].values[k];
    if (k < 0 || k >= d.n || scaled === null || scaled === undefined) {
      showTip(state, event, null);
      guide.style.display = "none";
      return;
    }
    const t = d.tip.titles;
    showTip(state, event, [[t.key_token, d.tip.key_tokens[k]], [t.key_pos, k],
                           [t.weight, scaled.toFixed(4)],
                           [t.unscaled_weight, d.series[1].values[k].toFixed(4)],
                           [t.raw_score, d.tip.raw_score[k].toFixed(3)]]);
    guide.style.display = "block";
    guide.style.left = `${((k + 0.5) / d.n) * r.width}px`;
  });
  canvas.addEventListener("pointerleave", () => {
    showTip(state, {}, null);
    guide.style.display = "none";
  });
}

function paintRow(state) {
  const data = state.data, { canvas, width, height, title } = state.row, n = data.n;
  title.textContent = data.title || "";
  const ctx = canvas.getContext("2d"), s = canvas.width / width;
  ctx.setTransform(s, 0, 0, s, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = "#e6e8ef";                                // grid lines at the y ticks
  ctx.lineWidth = 1;
  for (const t of data.y.ticks) {
    ctx.beginPath();
    ctx.moveTo(0, height - t * height);
    ctx.lineTo(width, height - t * height);
    ctx.stroke();
  }
  ctx.lineWidth = 1.2;
  for (const series of data.series) {                         // step after each key
    ctx.strokeStyle = series.color;
    ctx.beginPath();
    let down = false;
    series.values.forEach((v, k) => {
      if (v === null) { down = false; return; }               // masked: a gap
      const y = height - Math.min(1, Math.max(0, v)) * height;
      if (down) ctx.lineTo((k / n) * width, y); else ctx.moveTo((k / n) * width, y);
      ctx.lineTo(((k + 1) / n) * width, y);
      down = true;
    });
    ctx.stroke();
  }
}

// ---- one bar a key (kind "bars"): heights from 0, each bar its own colour ----

function buildBars(state, data) {
  const { root } = state;
  root.replaceChildren();
  const { width, height, n } = data;
  const box = el("div", "ae-row-box");
  const plot = el("div", "ae-plot");
  const canvas = sizedCanvas(width, height, data.y.title);
  plot.appendChild(canvas);
  const ys = data.y.ticks.map(([at, text]) => [height - at * height, text]);
  const xlabels = data.x.labels ? axisLabels(data.x, n, n, width, false)
    : tickLabels(data.x.ticks.map((t) => [((t + 0.5) / n) * width, String(t)]), width, false);
  box.append(el("div", "ae-ytitle", data.y.title), tickLabels(ys, height, true), plot, xlabels,
             el("div", "ae-xtitle", data.x.title));
  state.tip = tooltip();
  root.append(box, legendBar(data.legend, Math.min(width, 400)), state.tip);
  state.bars = { canvas };
  canvas.addEventListener("pointermove", (event) => {
    const d = state.data, r = canvas.getBoundingClientRect();
    const k = Math.floor(((event.clientX - r.left) / r.width) * d.n);
    if (k < 0 || k >= d.n || d.heights[k] === null) { showTip(state, event, null); return; }
    const t = d.tip.titles, shade = d.shades[k];
    showTip(state, event, [[t.token, d.tip.tokens[k]], [t.pos, k], [t.y, d.heights[k].toFixed(3)],
                           [t.shade, shade === null ? "—" : shade.toFixed(3)]]);
  });
  canvas.addEventListener("pointerleave", () => showTip(state, {}, null));
}

function paintBars(state) {
  const d = state.data, { canvas } = state.bars, { width, height, n } = d;
  const ctx = canvas.getContext("2d"), s = canvas.width / width;
  ctx.setTransform(s, 0, 0, s, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.strokeStyle = "#e6e8ef";                                // grid lines at the y ticks
  ctx.lineWidth = 1;
  for (const [at] of d.y.ticks) {
    ctx.beginPath();
    ctx.moveTo(0, height - at * height);
    ctx.lineTo(width, height - at * height);
    ctx.stroke();
  }
  const step = width / n, gap = Math.min(2, step * 0.1);
  d.heights.forEach((v, k) => {
    if (v === null) return;                                   // nothing known: no bar
    const top = height - Math.min(1, Math.max(0, v / d.top)) * height;
    ctx.fillStyle = d.colors[k];
    ctx.fillRect(k * step + gap / 2, top, Math.max(1, step - gap), height - top);
  });
}

// ---- every head of a model at a glance (kind "grid"): click a head to pick it ----

function buildGrid(state, data) {
  const { root } = state;
  root.replaceChildren();
  const step = data.blocks + 1;
  const width = data.heads * step * data.px, height = data.layers * step * data.px;
  const box = el("div", "ae-row-box");
  const plot = el("div", "ae-plot");
  const canvas = sizedCanvas(width, height, `${data.y.title} × ${data.x.title}`);
  plot.appendChild(canvas);
  box.append(el("div", "ae-ytitle", data.y.title), tickLabels(data.y.ticks, height, true), plot,
             tickLabels(data.x.ticks, width, false), el("div", "ae-xtitle", data.x.title));
  const legendSlot = el("div", "ae-legend-slot");
  state.tip = tooltip();
  root.append(box, legendSlot, state.tip);
  state.grid = { canvas, width, height, legendSlot };
  canvas.addEventListener("pointermove", (event) => {
    const at = gridAt(state, canvas, event);
    showTip(state, event, at && gridTip(state.data, at));
  });
  canvas.addEventListener("pointerleave", () => showTip(state, {}, null));
  canvas.addEventListener("click", (event) => {
    const at = gridAt(state, canvas, event);
    if (at) state.setTriggerValue("pick", { layer: at.layer, head: at.head });
  });
}

// The head and block under the pointer, or null over a gap between heads.
function gridAt(state, canvas, event) {
  const d = state.data, r = canvas.getBoundingClientRect(), step = d.blocks + 1;
  const ux = Math.floor(((event.clientX - r.left) / r.width) * d.heads * step);
  const uy = Math.floor(((event.clientY - r.top) / r.height) * d.layers * step);
  if (ux < 0 || uy < 0 || ux >= d.heads * step || uy >= d.layers * step) return null;
  const kb = ux % step, qb = uy % step;
  if (kb === d.blocks || qb === d.blocks) return null;
  return { layer: Math.floor(uy / step), head: Math.floor(ux / step), qb, kb, ux, uy };
}

function gridTip(d, at) {
  const t = d.tip.titles, lines = [[t.layer, at.layer], [t.head, at.head]];
  if (d.tip.values) {
    lines.push([t.query, d.tip.labels[at.qb]], [t.key, d.tip.labels[at.kb]]);
    const v = d.tip.values[at.uy][at.ux];
    if (v !== null) lines.push([t.weight, v.toFixed(3)]);
  }
  return lines;
}

function paintGrid(state, image) {
  const d = state.data, { canvas, width, height, legendSlot } = state.grid;
  const ctx = canvas.getContext("2d"), s = canvas.width / width;
  ctx.setTransform(s, 0, 0, s, 0, 0);
  ctx.clearRect(0, 0, width, height);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(image, 0, 0, width, height);
  if (d.current) {                                            // the head shown below, framed
    const [layer, head] = d.current, step = d.blocks + 1, px = d.px;
    ctx.strokeStyle = "#d62728";
    ctx.lineWidth = 2;
    ctx.strokeRect(head * step * px - 1, layer * step * px - 1, d.blocks * px + 2,
                   d.blocks * px + 2);
  }
  const legend = JSON.stringify(d.panels[0].legend);
  if (legendSlot.dataset.legend !== legend) {
    legendSlot.replaceChildren(legendBar(d.panels[0].legend, Math.min(width, 400)));
    legendSlot.dataset.legend = legend;
  }
}

// A row, grid or bars figure wider than its column scrolls sideways in its own box
// (canvas.css); while it does, a line above it says so (a phone's scroll bar is an overlay,
// drawn only while a finger moves it). The line stays put while the figure scrolls.
// Whether it overflows is read once the browser has laid the figure out: after a new layout
// (`rebuilt`) on the next frame, and when the column narrows or widens (a turned phone). Read
// on every redraw, in the middle of React's commit, it forced a layout of the whole page on
// each click (a head pick redraws figures whose layout is unchanged).
function scrollHint(state, text, rebuilt) {
  const { root } = state;
  let hint = root.querySelector(":scope > .ae-scroll-hint");
  if (!text) {
    if (hint) hint.remove();
    return;
  }
  if (!hint) {
    hint = el("div", "ae-scroll-hint");
    root.prepend(hint);
  }
  if (hint.textContent !== text) hint.textContent = text;
  if (!state.overflowObserver) {           // its first report comes once the figure is laid out
    state.overflowObserver = new ResizeObserver(() => markOverflow(state));
    state.overflowObserver.observe(root);
  } else if (rebuilt) {
    requestAnimationFrame(() => markOverflow(state));
  }
}

// The figure's heading and notes (figure_view's `heading`, `notes`), above everything else:
// drawn here, not as Streamlit elements, they cost a click nothing when unchanged (a subheader
// and a caption are re-rendered by React on every commit of every rerun of their section).
function header(state, data) {
  const { root } = state, notes = data.notes || [];
  if (!data.heading && !notes.length) {
    if (state.head) state.head.remove();
    state.head = null;
    return;
  }
  const text = JSON.stringify([data.heading || "", notes]);
  if (!state.head || state.headText !== text) {
    const head = el("div", "ae-head");
    if (data.heading) head.appendChild(el("h3", "ae-heading", data.heading));
    for (const note of notes) head.appendChild(el("p", "ae-note", note));
    if (state.head) state.head.replaceWith(head);
    state.head = head;
    state.headText = text;
  }
  if (root.firstChild !== state.head) root.prepend(state.head);   // a rebuild emptied the root
}

function markOverflow(state) {
  const { root } = state;
  root.classList.toggle("ae-overflows", root.scrollWidth > root.clientWidth + 1);
}

export default function (component) {
  const { parentElement, setTriggerValue } = component;
  const data = unpack(component.data);
  let state = roots.get(parentElement);
  if (!state) {
    const root = el("div", "ae-heatmap");
    parentElement.appendChild(root);
    pageFont = pageFont || getComputedStyle(root).fontFamily;   // one style read a page
    state = { root, layout: null, version: 0 };
    roots.set(parentElement, state);
  }
  state.data = data;
  state.setTriggerValue = setTriggerValue;
  state.root.toggleAttribute("data-brush", !!data.brush);
  state.root.classList.toggle("ae-row", ["row", "grid", "bars"].includes(data.kind));
  state.root.classList.toggle("ae-grid", data.kind === "grid");
  const version = ++state.version;
  state.root.dataset.pending = "1";
  const rebuilt = state.layout !== data.layout;
  if (rebuilt) {
    ({ row: buildRow, grid: buildGrid, bars: buildBars }[data.kind] || build)(state, data);
    state.layout = data.layout;
  } else if (data.labels_key && state.labelsKey !== data.labels_key) {
    relabel(state, data);
  }
  state.labelsKey = data.labels_key;
  scrollHint(state, data.scroll_hint, rebuilt);
  header(state, data);
  if (data.kind === "row" || data.kind === "bars") {         // no images: drawn at once
    (data.kind === "row" ? paintRow : paintBars)(state);
    state.root.dataset.drawn = String(version);
    delete state.root.dataset.pending;
    return;
  }
  Promise.all(data.panels.map((panel) => decoded(panel.image))).then((decodedImages) => {
    if (version !== state.version) return;                 // a newer figure came meanwhile
    if (data.kind === "grid") paintGrid(state, decodedImages[0]);
    else data.panels.forEach((panel, i) => paint(state, panel, decodedImages[i], i));
    state.root.dataset.drawn = String(version);
    delete state.root.dataset.pending;
  }).catch(() => { if (version === state.version) delete state.root.dataset.pending; });
}
