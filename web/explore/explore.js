// The explorer: draws the recorded numbers in data.js (window.EXPLORE_DATA, written by cli/explore.py).
// It computes no number of its own: every value shown is read from the data and only placed, coloured
// and formatted here; the numbers table holds each value's exact text (the float64 read back from JSON).
(function () {
  'use strict';
  const D = window.EXPLORE_DATA;
  const $ = (id) => document.getElementById(id);
  const VIEWS = D.views_order;
  const ARCHS = ['plain', 'residual'];
  const CONTROLS = {  // which controls each view uses
    flow: ['family', 'depth', 'act', 'seed', 'arch', 'step', 'pulse'],
    chain: ['family', 'depth', 'act', 'seed', 'arch', 'step', 'block'],
    degradation: ['family', 'act', 'arch', 'step'],
    responses: ['family', 'depth', 'act', 'arch', 'step'],
    layernorm: ['family'],
    map: ['family', 'depth', 'act', 'seed', 'arch', 'step'],
  };
  const DASHES = ['', '10 5', '3 5', '14 5 3 5', '1 4', '20 6'];
  const state = {view: 'flow', family: null, depth: null, act: null, seed: null, step: null, arch: 'both',
                 block: null, lang: D.defaults.lang, theme: D.defaults.theme};
  let timer = null;
  let pulseFrame = null;

  // -- values and words --------------------------------------------------------------------------
  const num = (v) => (typeof v === 'number' ? v : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : NaN);
  const exact = (v) => (typeof v === 'number' ? String(v) : v);  // the float64's shortest round-trip text
  function fmt(v) {
    const x = num(v);
    if (Number.isNaN(x)) return ui('missing');
    if (!Number.isFinite(x)) return x > 0 ? '∞' : '−∞';
    if (x === 0) return '0';
    const a = Math.abs(x);
    if (a >= 1e-3 && a < 1e4) return String(Number(x.toPrecision(3)));
    const [mantissa, exponent] = x.toExponential(2).split('e');
    return `${mantissa}×${pow10(Number(exponent))}`;  // as the scenes write it (scenes.kit.style.format_number)
  }
  // 10 to the power e as on a board: 1, 10, 10⁻³ (scenes.kit.style.power_of_ten), for log axes and colour scales
  const pow10 = (e) => (e === 0 ? '1' : e === 1 ? '10' : '10' + String(e).replace(/[-0-9]/g, (c) => '⁻⁰¹²³⁴⁵⁶⁷⁸⁹'['-0123456789'.indexOf(c)]));
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  const S = () => D.strings[state.lang];
  function fill(text, values) {
    // {n:plural:one=seed|other=seeds}: the form of n's CLDR plural category in the page's language (the
    // browser's Intl.PluralRules; the scenes use Babel's: narration.i18n.format_text), "other" if not given
    let out = text.replace(/\{(\w+):plural:([^{}]*)\}/g, (field, k, spec) => {
      if (!values || !(k in values)) return field;
      const forms = Object.fromEntries(spec.split('|').map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)]));
      const category = new Intl.PluralRules(state.lang).select(Number(values[k]));
      return category in forms ? forms[category] : forms.other;
    });
    for (const [k, v] of Object.entries(values || {})) out = out.split('{' + k + '}').join(v);
    return out;
  }
  const ui = (key, values) => fill(S().ui[key], values);
  // a bar legend's seed words: the other seeds' dots (said only where there are any, with their number) and the spread
  const otherSeeds = (n) => (n > 1 ? ` · ${esc(ui('dots', {m: n - 1}))}` : '') + ` · ${esc(ui('seed_spread', {n}))}`;
  const archName = (arch) => S().common[arch];
  const shown = (arch) => (state.arch === 'both' || state.arch === arch) && held(arch);
  function held(arch) {  // whether the family shown has any plain (residual) run: a watched run without --twin has none
    const fam = family();
    const archs = fam && fam.runs ? fam.runs.map((r) => r.arch) : [];
    return !archs.some((a) => ARCHS.includes(a)) || archs.includes(arch);  // views of other pairs: not concerned
  }
  const uniq = (xs) => Array.from(new Set(xs));
  const byNumber = (a, b) => (typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b)));

  // -- selection -----------------------------------------------------------------------------------
  const families = () => D.views[state.view].families;
  function family() {
    const all = families();
    return all.find((f) => f.id === state.family) || all[0] || null;
  }
  function firstSeed(runs) {  // the seed of the bare run keys (the first of ``seeds``); else the lowest
    const bare = runs.find((r) => !r.name.includes('@seed'));
    return bare ? bare.seed : Math.min(...runs.map((r) => r.seed));
  }
  function choices(fam) {
    const runs = fam ? fam.runs : [];
    return {depth: uniq(runs.map((r) => r.depth)).sort(byNumber),
            act: uniq(runs.map((r) => r.activation)).sort(byNumber),
            seed: uniq(runs.map((r) => r.seed)).sort(byNumber)};
  }
  function flowGroup(fam) {  // the flow, chain-rule and map views: the plain/residual pair of the selection
    return fam && fam.groups.find((g) => g.depth === state.depth && g.activation === state.act && g.seed === state.seed);
  }
  const mapSteps = (run) => run.steps;  // the step each column of a map stands for (exported)
  const ofAct = (runs) => runs.filter((r) => r.activation === state.act);  // the runs of the selected activation
  function pairRuns(fam) {  // responses: {arch: run} of the selected depth and activation, first seed; and every seed's
    const runs = ofAct(fam.runs).filter((r) => r.depth === state.depth);
    const seed0 = runs.length ? firstSeed(runs) : null;
    const first = {};
    for (const r of runs) if (r.seed === seed0 && !(r.arch in first)) first[r.arch] = r;
    return {runs, first, seed0};
  }
  function timeline() {  // the training steps the step control moves over
    const fam = family();
    if (!fam) return [];
    if (state.view === 'flow' || state.view === 'chain') {
      const g = flowGroup(fam);
      if (!g) return [];
      return uniq(Object.values(g.runs).flatMap((i) => fam.runs[i].steps)).sort((a, b) => a - b);
    }
    if (state.view === 'degradation') {
      return uniq(ofAct(fam.runs).filter((r) => shown(r.arch)).flatMap((r) => r.curve_steps)).sort((a, b) => a - b);
    }
    if (state.view === 'responses') {
      const {first} = pairRuns(fam);
      return uniq(Object.values(first).flatMap((r) => r.steps)).sort((a, b) => a - b);
    }
    if (state.view === 'map') {
      const g = flowGroup(fam);
      if (!g) return [];
      return uniq(Object.values(g.runs).flatMap((i) => mapSteps(fam.runs[i]))).sort((a, b) => a - b);
    }
    return [];
  }
  function stepIndex(steps) {  // the record nearest the wanted step (the last one when none is wanted)
    if (!steps.length) return -1;
    if (state.step === null) return state.view === 'degradation' ? steps.length - 1 : 0;
    let best = 0;
    for (let i = 1; i < steps.length; i++) if (Math.abs(steps[i] - state.step) < Math.abs(steps[best] - state.step)) best = i;
    return best;
  }
  function normalise() {  // keep the selection among what exists; an untrained combination is kept and reported
    const all = families();
    // a view without the family shown before (a tab change) opens its first: what that family lacks is not kept
    const replaced = state.family !== null && !all.find((f) => f.id === state.family);
    if (!all.find((f) => f.id === state.family)) state.family = all.length ? all[0].id : null;
    const c = choices(family());
    const keep = (key, list) => { if (!list.includes(state[key])) state[key] = list.length ? list[0] : null; };
    if (state.view !== 'layernorm') {
      for (const key of ['depth', 'act', 'seed']) {
        if (state[key] === null || !c[key].length || (replaced && !c[key].includes(state[key]))) keep(key, c[key]);
      }
    }
  }

  // -- the URL fragment keeps the state ------------------------------------------------------------
  let ownHash = null;  // the fragment as this page last read or wrote it
  function readHash() {  // the fragment is the whole state: what it leaves out takes its default
    ownHash = location.hash;
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    state.view = VIEWS.includes(p.get('view')) ? p.get('view') : VIEWS[0];
    state.family = p.get('family');
    for (const key of ['depth', 'seed', 'step', 'block']) {
      state[key] = p.has(key) && /^-?\d+$/.test(p.get(key)) ? parseInt(p.get(key), 10) : null;
    }
    state.act = p.get('act');
    state.arch = 'both';
    if (['both', 'plain', 'residual', 'none'].includes(p.get('arch'))) state.arch = p.get('arch');
    if (Object.keys(D.strings).includes(p.get('lang'))) state.lang = p.get('lang');
    if (p.get('theme') in D.themes) state.theme = p.get('theme');
  }
  let hashTimer = null;
  function writeHash() {  // after the redraw, not inside it: history.replaceState costs a few ms
    if (hashTimer !== null) clearTimeout(hashTimer);
    hashTimer = setTimeout(writeHashNow, 30);
  }
  function writeHashNow() {
    hashTimer = null;
    if (location.hash !== ownHash) return;  // changed from outside since: its hashchange comes next and wins
    const p = new URLSearchParams();
    p.set('view', state.view);
    if (state.family !== null) p.set('family', state.family);
    const used = CONTROLS[state.view];
    if (used.includes('depth') && state.depth !== null) p.set('depth', state.depth);
    if (used.includes('act') && state.act !== null) p.set('act', state.act);
    if (used.includes('seed') && state.seed !== null) p.set('seed', state.seed);
    if (used.includes('step') && state.step !== null) p.set('step', state.step);
    if (used.includes('block') && state.block !== null) p.set('block', state.block);
    p.set('arch', state.arch);
    p.set('lang', state.lang);
    p.set('theme', state.theme);
    history.replaceState(null, '', '#' + p.toString());
    ownHash = location.hash;
  }

  // -- drawing helpers -----------------------------------------------------------------------------
  function level(value, scale) {  // position on the flow view's log scale, 0..1 (0: zero, missing, or below)
    const x = num(value);
    if (!scale || !(x > 0) || !Number.isFinite(x)) return 0;
    return Math.min(1, Math.max(0, (Math.log10(x) - scale[0]) / (scale[1] - scale[0])));
  }
  const attr = (o) => Object.entries(o).map(([k, v]) => `${k}="${esc(v)}"`).join(' ');
  const text = (x, y, s, cls, extra) => `<text ${attr(Object.assign({x, y, class: cls || ''}, extra || {}))}>${esc(s)}</text>`;
  function logScale(values, floorAtLeast) {  // integer decades spanning the finite positive values
    const pos = values.map(num).filter((x) => x > 0 && Number.isFinite(x));
    if (!pos.length) return [-1, 1];
    let lo = Math.floor(Math.log10(Math.min(...pos)));
    let hi = Math.ceil(Math.log10(Math.max(...pos)));
    if (floorAtLeast !== undefined) hi = Math.max(hi, floorAtLeast);
    if (hi === lo) hi = lo + 1;
    return [lo, hi];
  }
  function cell(value, extra) {
    return `<td ${attr(Object.assign({'data-value': exact(value)}, extra || {}))}>${esc(Number.isNaN(num(value)) ? ui('missing') : exact(value))}</td>`;
  }
  function setHtml(el, html) {  // only when it changed: the same markup again would rebuild the same nodes
    if (el._html !== html) { el.innerHTML = html; el._html = html; }
  }
  function table(head, rows) {
    setHtml(document.querySelector('#numbers thead'), '<tr>' + head.map((h) => `<th scope="col">${esc(h)}</th>`).join('') + '</tr>');
    setHtml(document.querySelector('#numbers tbody'), rows.join(''));
    document.querySelector('.table-wrap').hidden = rows.length === 0;
  }

  // -- room for the chart's words -----------------------------------------------------------------
  // The chart is 1000 units wide, scaled to the page; its text sizes are the stylesheet's (--font, --font-small,
  // in chart units: a phone's are about twice a desktop's, to stay legible). Every view measures its words at
  // those sizes and places them where they fit, so that no word runs into another or off the chart.
  const W = 1000, H = 360;  // the chart's width and its default height (a view may make it taller)
  const LINE = 1.5;  // line spacing in text sizes: a CJK font's line box is about 1.45 of its size
  let fonts = {big: 15, small: 13, family: 'sans-serif'};  // the chart's text sizes, read in render()
  function chartFonts() {
    const cs = getComputedStyle($('chart'));
    return {big: parseFloat(cs.getPropertyValue('--font')) || 15, small: parseFloat(cs.getPropertyValue('--font-small')) || 13,
            family: cs.fontFamily};
  }
  const measurer = document.createElement('canvas').getContext('2d');
  function textWidth(s, size) {  // the advance of ``s`` at ``size`` chart units in the chart's font
    measurer.font = `${size}px ${fonts.family}`;
    return measurer.measureText(String(s)).width;
  }
  const widest = (strings, size) => Math.max(0, ...strings.map((s) => textWidth(s, size)));
  function wrap(s, size, width) {  // ``s`` as lines no wider than ``width``: broken at spaces, or between CJK characters
    const parts = String(s).match(/[\u2e80-\u9fff\uff00-\uffef][\u3000-\u303f\uff0c\uff1a\uff1b\uff09]*|\s+|[^\s\u2e80-\u9fff\uff00-\uffef]+/g) || [];
    const lines = [];
    let line = '';
    for (const part of parts) {
      const next = line + part;
      if (line.trim() && textWidth(next.trimEnd(), size) > width) { lines.push(line.trimEnd()); line = part.trimStart(); }
      else line = next;
    }
    if (line.trim()) lines.push(line.trimEnd());
    return lines;
  }
  function textLines(x, y, lines, lineHeight, cls, extra) {  // one text element, one tspan per line
    const spans = lines.map((line, i) => `<tspan x="${x}" dy="${i ? lineHeight : 0}">${esc(line)}</tspan>`).join('');
    return `<text ${attr(Object.assign({x, y, class: cls || ''}, extra || {}))}>${spans}</text>`;
  }
  function spread(labels, gapY, lo, hi) {  // end labels [{y}]: sorted, at least gapY apart, within lo..hi where they fit
    labels.sort((a, b) => a.y - b.y);
    labels.forEach((lab, i) => { lab.y = Math.max(lab.y, lo, i ? labels[i - 1].y + gapY : lo); });
    for (let i = labels.length - 1; i >= 0; i--) labels[i].y = Math.min(labels[i].y, i === labels.length - 1 ? hi : labels[i + 1].y - gapY);
    return labels;
  }

  // -- views ---------------------------------------------------------------------------------------
  const X0 = 110, X1 = 900;

  // A step change within one selection only changes values: the flow and chain-rule views then set the
  // attributes and texts of the elements already drawn (no new nodes to style and lay out).
  const drawn = {flow: null, chain: null};  // the selection each view last drew in full
  function selection(fam, g, extra) {
    const recorded = ARCHS.map((a) => shown(a) && a in g.runs && fam.runs[g.runs[a]].steps.includes(state.step));
    return JSON.stringify([state.family, state.depth, state.act, state.seed, state.arch, state.lang, fonts.big, recorded, extra]);
  }
  function setCell(td, value) {
    const v = exact(value);
    if (td.dataset.value !== v) { td.dataset.value = v; td.textContent = Number.isNaN(num(value)) ? ui('missing') : v; }
  }
  function untrainedStatus(fam, g, out) {
    for (const arch of ARCHS) {
      if (shown(arch) && !(arch in g.runs)) {
        out.status.push(ui('not_trained', {what: `${archName(arch)}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}`,
                                           trained: trainedList(fam, arch)}));
      }
    }
  }
  function updateFlow(fam, g, out) {
    const chart = $('chart');
    untrainedStatus(fam, g, out);
    for (const arch of ARCHS) {
      if (!shown(arch) || !(arch in g.runs)) continue;
      const run = fam.runs[g.runs[arch]];
      const k = run.steps.indexOf(state.step);
      const grads = run.out_grad_norm[k];
      const rects = chart.querySelectorAll(`rect.blk.${arch}`), segs = chart.querySelectorAll(`line.seg.${arch}`);
      const cells = document.querySelectorAll(`#numbers td[data-arch=${arch}]`);
      const levels = grads.map((v) => level(v, g.scale));
      for (let l = 0; l < run.blocks; l++) {
        const lv = levels[l];
        rects[l].setAttribute('fill-opacity', lv > 0 ? 0.06 + 0.94 * lv : 0);
        rects[l].dataset.value = exact(grads[l]);
        rects[l].classList.toggle('gap', Number.isNaN(num(grads[l])));
        rects[l].firstChild.textContent = `${run.layers[l]}: ${exact(grads[l])}`;
        segs[l].setAttribute('stroke-width', lv > 0 ? 1 + 11 * lv : 0);
        segs[l].setAttribute('stroke-opacity', lv > 0 ? 0.15 + 0.85 * lv : 0);
        setCell(cells[l], grads[l]);
      }
      const ratio = chart.querySelector(`text.ratio.${arch}`);
      ratio.textContent = fill(S().views.flow.ratio, {value: fmt(run.product[k][0])});
      ratio.dataset.value = exact(run.product[k][0]);
      const prev = lastSeries[arch];
      out.series[arch] = Object.assign({}, prev, {run, k, levels});
    }
    out.kept = true;
  }

  function drawFlow(fam, out) {
    const g = flowGroup(fam);
    const rows = [];
    if (!g) {
      out.status.push(notTrained(fam, ARCHS.filter(shown)));
      drawn.flow = null;
      return;
    }
    for (const arch of ARCHS.filter((a) => shown(a) && a in g.runs)) {  // finite, but it did not train
      const run = fam.runs[g.runs[arch]];
      if (run.blew_up) {
        const what = `${archName(arch)}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}`;
        out.status.push(ui('blew_up', {what, start: fmt(run.blew_up[0]), end: fmt(run.blew_up[1])}));
      }
    }
    const key = selection(fam, g, null);
    if (drawn.flow === key && $('chart').querySelector('rect.blk')) { updateFlow(fam, g, out); return; }
    drawn.flow = key;
    // The layout, top to bottom: per net shown, its label and its input-to-loss ratio (one line where both fit,
    // else two), its blocks on the wire between "input" and "loss"; then the scale. Widths measured at the
    // chart's text sizes: the words at the wire's ends and the scale's lowest decade set the margins.
    const {big, small} = fonts;
    const lh = LINE * big, gap = 0.8 * big;
    const ratioText = (v) => fill(S().views.flow.ratio, {value: fmt(v)});
    const scaleLo = g.scale ? pow10(g.scale[0]) : '', scaleHi = g.scale ? pow10(g.scale[1]) : '';
    const x0 = Math.max(X0, textWidth(ui('input'), big) + 56, textWidth(scaleLo, small) + 16);
    const x1 = Math.min(X1, W - 56 - textWidth(ui('loss'), big));
    let svg = '';
    let bottom = 0;  // the lowest point drawn so far
    const head = [S().common.block];
    for (const arch of ARCHS) {
      if (!shown(arch)) continue;
      const what = `${archName(arch)}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}`;
      head.push(`${archName(arch)} ${ui('grad_out')}`);
      const rowTop = bottom ? bottom + 1.5 * gap : 4;
      if (!(arch in g.runs)) {
        const note = ui('not_trained', {what, trained: trainedList(fam, arch)});
        out.status.push(note);
        const lines = wrap(note, big, W - 8 - x0);
        svg += textLines(x0, rowTop + big, lines, lh, 'warn untrained', {'data-arch': arch});
        bottom = rowTop + big + lh * (lines.length - 1) + 0.3 * big;
        continue;
      }
      const run = fam.runs[g.runs[arch]];
      const k = run.steps.indexOf(state.step);
      const L = run.blocks;
      const slot = (x1 - x0) / L;
      const label = S().views.flow.rows[arch];
      const ratioW = widest(uniq(run.product.map((p) => ratioText(p[0]))), big);  // the widest any record gives
      const oneLine = x0 + textWidth(label, big) + gap + ratioW <= x1 + 48;
      const labelY = rowTop + big, ratioY = oneLine ? labelY : labelY + lh;
      const y = ratioY + 0.3 * big + 24;  // the blocks' middle, 18 below their top
      const pathY = arch === 'plain' ? y : y + 46;
      svg += `<text x="${x0}" y="${labelY}" class="rowlabel ${arch}">${esc(label)}</text>`;
      svg += `<line x1="${x0 - 40}" y1="${pathY}" x2="${x1 + 40}" y2="${pathY}" class="wire ${arch}"/>`;
      svg += text(x0 - 48, pathY + 0.35 * big, ui('input'), 'muted end', {'text-anchor': 'end'}) +
             text(x1 + 48, pathY + 0.35 * big, ui('loss'), 'muted end');
      const laneY = pathY + 8 + small;
      bottom = arch === 'residual' ? laneY + 0.3 * small : Math.max(y + 18, pathY + 0.35 * big + 0.3 * big);
      if (k < 0) {
        out.status.push(ui('not_recorded', {what, step: state.step}));
        continue;
      }
      const grads = run.out_grad_norm[k];
      const bw = Math.min(0.7 * slot, 36);
      for (let l = 0; l < L; l++) {
        const cx = x0 + slot * (l + 0.5);
        const lv = level(grads[l], g.scale);
        const missing = Number.isNaN(num(grads[l]));
        svg += `<line class="seg ${arch}" x1="${x0 + slot * l}" y1="${pathY}" x2="${x0 + slot * (l + 1)}" y2="${pathY}" stroke-width="${lv > 0 ? 1 + 11 * lv : 0}" stroke-opacity="${lv > 0 ? 0.15 + 0.85 * lv : 0}"/>`;
        if (arch === 'residual') svg += `<path class="branch" d="M${x0 + slot * l + 2} ${pathY} L${cx - bw / 2} ${y + 14} M${cx + bw / 2} ${y + 14} L${x0 + slot * (l + 1) - 2} ${pathY}"/>`;
        svg += `<rect class="blk ${arch}${missing ? ' gap' : ''}" x="${cx - bw / 2}" y="${y - 18}" width="${bw}" height="36" rx="4" ` +
               `fill-opacity="${lv > 0 ? 0.06 + 0.94 * lv : 0}" ${attr({'data-arch': arch, 'data-block': l, 'data-value': exact(grads[l])})}>` +
               `<title>${esc(run.layers[l])}: ${esc(exact(grads[l]))}</title></rect>`;
      }
      if (arch === 'residual') svg += text(x1, laneY, S().views.flow.lane, 'small identity', {'text-anchor': 'end'});
      svg += text(x1 + 48, ratioY, ratioText(run.product[k][0]), 'ratio ' + arch,
                  {'text-anchor': 'end', 'data-arch': arch, 'data-value': exact(run.product[k][0])});
      out.series[arch] = {run, k, pathY, slot, x0, x1, levels: grads.map((v) => level(v, g.scale))};
    }
    // the shared log scale, dark to bright; its caption beside it where it fits, else on the line below
    if (g.scale) {
      const barTop = bottom + 1.5 * gap, textY = barTop + 6 + 0.35 * small;
      const caption = S().views.flow.caption[0];
      const hiEnd = x0 + 208 + textWidth(scaleHi, small);
      const left = x0 - 8 - textWidth(scaleLo, small);
      const beside = hiEnd + gap + textWidth(caption, small) <= W - 4;
      const lines = beside ? [caption] : wrap(caption, small, W - 4 - left);
      svg += `<defs><linearGradient id="scale-grad"><stop offset="0" class="stop0"/><stop offset="1" class="stop1"/></linearGradient></defs>`;
      svg += `<rect x="${x0}" y="${barTop}" width="200" height="12" fill="url(#scale-grad)" class="scalebar"/>`;
      svg += text(x0 - 8, textY, scaleLo, 'muted small', {'text-anchor': 'end'}) + text(x0 + 208, textY, scaleHi, 'muted small');
      const capY = beside ? textY : textY + LINE * small;
      svg += textLines(beside ? hiEnd + gap : left, capY, lines, LINE * small, 'muted small');
      bottom = capY + LINE * small * (lines.length - 1) + 0.3 * small;
    }
    out.svg = svg;
    out.height = bottom + 6;
    const L = Math.max(0, ...Object.values(out.series).map((s) => s.run.blocks));
    for (let l = 0; l < L; l++) {
      const any = Object.values(out.series)[0].run;
      let row = `<tr><th scope="row">${esc(any.layers[l] || l)}</th>`;
      for (const arch of ARCHS) {
        if (!shown(arch)) continue;
        const s = out.series[arch];
        row += s && l < s.run.blocks ? cell(s.run.out_grad_norm[s.k][l], {'data-arch': arch, 'data-block': l}) : '<td>—</td>';
      }
      rows.push(row + '</tr>');
    }
    table(head, rows);
  }

  function drawChain(fam, out) {
    const g = flowGroup(fam);
    if (!g) { out.status.push(notTrained(fam, ARCHS.filter(shown))); drawn.chain = null; return; }
    const series = {};
    for (const arch of ARCHS) {
      if (!shown(arch)) continue;
      const what = `${archName(arch)}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}`;
      if (!(arch in g.runs)) { out.status.push(ui('not_trained', {what, trained: trainedList(fam, arch)})); continue; }
      const run = fam.runs[g.runs[arch]];
      const k = run.steps.indexOf(state.step);
      if (k < 0) { out.status.push(ui('not_recorded', {what, step: state.step})); continue; }
      series[arch] = {run, k};
    }
    const runs = Object.values(series);
    if (!runs.length) { drawn.chain = null; return; }
    const L = runs[0].run.blocks;
    const bound = runs[0].run.bound || null;
    // one axis for every recorded step of the runs shown, so that scrubbing moves the curves, not the axis
    const values = runs.flatMap((s) => s.run.product.flat()).concat(bound || []);
    const [lo, hi] = logScale(values, 0);
    const every = Math.ceil((hi - lo) / 8);  // at most 9 decades labelled (22 decades on a phone are a smear)
    const decades = [];
    for (let e = lo; e <= hi; e += every) decades.push(e);
    const top = Math.max(30, Math.ceil(1.1 * fonts.small) + 8), bottom = 300;  // room above the axis for its label
    const x0 = Math.max(X0, widest(decades.map(pow10), fonts.small) + 16);  // room left of it for the decades
    const px = (l) => (L === 1 ? (x0 + X1) / 2 : x0 + (X1 - x0) * l / (L - 1));
    const py = (v) => { const x = num(v); return x > 0 && Number.isFinite(x) ? bottom - (bottom - top) * (Math.log10(x) - lo) / (hi - lo) : null; };
    const pathD = (vals) => {
      let d = '', pen = false;
      vals.forEach((v, l) => { const yy = py(v); if (yy === null) { pen = false; return; } d += `${pen ? 'L' : 'M'}${px(l)} ${yy} `; pen = true; });
      return d;
    };
    if (state.block === null || state.block >= L) state.block = 0;
    const curves = Object.values(series).map((s) => pathD(s.run.product[s.k]));
    const key = selection(fam, g, [lo, hi, top, x0, L, curves.map((d) => d !== '')]);
    const chart = $('chart');
    if (drawn.chain === key && chart.querySelector('circle.pt')) {  // a new step or block: move what is drawn
      Object.entries(series).forEach(([arch, s], i) => {
        const path = chart.querySelector(`path.curve.${arch}`);
        if (path) path.setAttribute('d', curves[i]);
        const pts = chart.querySelectorAll(`circle.pt.${arch}`);
        const cells = document.querySelectorAll(`#numbers td[data-arch=${arch}]`);  // per block: factor, product
        s.run.product[s.k].forEach((v, l) => {
          const yy = py(v);
          pts[l].setAttribute('cy', yy === null ? bottom : yy);
          pts[l].setAttribute('r', yy === null ? 0 : 5);
          pts[l].dataset.value = exact(v);
          setCell(cells[2 * l], s.run.factor[s.k][l]);
          setCell(cells[2 * l + 1], v);
        });
      });
      const cursor = chart.querySelector('line.cursor');
      cursor.setAttribute('x1', px(state.block));
      cursor.setAttribute('x2', px(state.block));
      out.kept = true;
    } else {
      drawn.chain = key;
      let svg = `<line x1="${x0}" y1="${bottom}" x2="${X1}" y2="${bottom}" class="axis"/><line x1="${x0}" y1="${top}" x2="${x0}" y2="${bottom}" class="axis"/>`;
      for (const e of decades) {
        const yy = bottom - (bottom - top) * (e - lo) / (hi - lo);
        svg += `<line x1="${x0}" y1="${yy}" x2="${X1}" y2="${yy}" class="grid"/>` + text(x0 - 8, yy + 0.3 * fonts.small, pow10(e), 'muted small', {'text-anchor': 'end'});
      }
      svg += text(x0, bottom + 30, `${S().common.block} 1 … ${L}`, 'muted small') + text(x0 + 8, top - 6, S().views.chain.axis_y, 'muted small');
      if (bound && pathD(bound)) svg += `<path class="bound" d="${pathD(bound)}"/>`;
      Object.entries(series).forEach(([arch, s], i) => {
        if (curves[i]) svg += `<path class="curve ${arch}" d="${curves[i]}"/>`;
        s.run.product[s.k].forEach((v, l) => {
          const yy = py(v);
          svg += `<circle class="pt ${arch}" cx="${px(l)}" cy="${yy === null ? bottom : yy}" r="${yy === null ? 0 : 5}" ${attr({'data-arch': arch, 'data-block': l, 'data-value': exact(v)})}/>`;
        });
      });
      const w = (X1 - x0) / Math.max(L - 1, 1);
      for (let l = 0; l < L; l++) {  // hover / tap targets, one column per block
        svg += `<rect class="hit" x="${px(l) - w / 2}" y="${top}" width="${w}" height="${bottom - top}" data-block="${l}"/>`;
      }
      svg += `<line class="cursor" x1="${px(state.block)}" x2="${px(state.block)}" y1="${top}" y2="${bottom}"/>`;
      out.svg = svg;
      const head = [S().common.block];
      for (const arch of Object.keys(series)) head.push(`${archName(arch)} ${ui('factor')}`, `${archName(arch)} ${ui('product')}`);
      if (bound) head.push(ui('bound'));
      const rows = [];
      for (let l = 0; l < L; l++) {
        let row = `<tr><th scope="row">${esc(runs[0].run.layers[l])}</th>`;
        for (const [arch, s] of Object.entries(series)) {
          row += cell(s.run.factor[s.k][l], {'data-arch': arch, 'data-block': l, 'data-kind': 'factor'});
          row += cell(s.run.product[s.k][l], {'data-arch': arch, 'data-block': l, 'data-kind': 'product'});
        }
        if (bound) row += cell(bound[l], {'data-kind': 'bound', 'data-block': l});
        rows.push(row + '</tr>');
      }
      table(head, rows);
    }
    out.blocks = L;
    const blockOut = [];
    for (const [arch, s] of Object.entries(series)) {
      const l = state.block;
      blockOut.push(`<span class="${arch}" data-arch="${arch}">${esc(archName(arch))}, ${esc(s.run.layers[l])}: ` +
        `${esc(ui('factor'))} × <span class="v" data-value="${esc(exact(s.run.factor[s.k][l]))}">${esc(fmt(s.run.factor[s.k][l]))}</span>, ` +
        `${esc(ui('product'))} <span class="v" data-value="${esc(exact(s.run.product[s.k][l]))}">${esc(fmt(s.run.product[s.k][l]))}</span></span>`);
    }
    if (bound) {
      blockOut.push(`<span class="warn">${esc(fill(S().views.chain.bound, {value: fmt(D.sigma_prime_max)}))}: ` +
        `<span class="v" data-value="${esc(exact(bound[state.block]))}">${esc(fmt(bound[state.block]))}</span></span>`);
    } else {
      blockOut.push(`<span class="muted">${esc(ui('no_bound', {value: fmt(D.sigma_prime_max), act: state.act}))}</span>`);
    }
    out.readout = blockOut.join('<br>');
    out.legend = bound ? `<span class="warn">- - ${esc(fill(S().views.chain.bound, {value: fmt(D.sigma_prime_max)}))}</span>` : '';
  }

  function drawDegradation(fam, out) {
    const ofActivation = ofAct(fam.runs);
    if (!ofActivation.length) {
      out.status.push(ui('not_trained', {what: state.act, trained: choices(fam).act.join(', ')}));
      table([], []);
      return;
    }
    const runs = ofActivation.filter((r) => shown(r.arch));
    if (!runs.length) { table([], []); return; }
    const seed0 = firstSeed(ofActivation);
    const depths = uniq(ofActivation.map((r) => r.depth)).sort(byNumber);
    const last = Math.max(...runs.flatMap((r) => r.curve_steps));
    const {small} = fonts;
    const top = Math.max(20, Math.ceil(small)), bottom = 300;
    const ymax = Math.min(1, Math.max(0.1, Math.ceil(Math.max(...runs.flatMap((r) => r.error.map(num)).filter(Number.isFinite)) * 10) / 10));
    // each first-seed curve ends in a label naming its net and depth: they take the column right of the curves
    const labels = [];
    for (const r of runs) {
      const i = stepIndexOf(r.curve_steps);
      const v = i < 0 ? NaN : r.error[i];
      if (r.seed === seed0 && i >= 0 && Number.isFinite(num(v))) {
        const curve = fill(S().views.degradation.curve, {depth: r.depth, error: fmt(v)});
        labels.push({v: num(v), s: ui('curve_label', {net: archName(r.arch), curve}), arch: r.arch, run: r.name});
      }
    }
    const XR = Math.min(800, W - 14 - widest(labels.map((lab) => lab.s), small));  // the curves end here
    const px = (s) => X0 + (XR - X0) * s / Math.max(last, 1);
    const py = (v) => bottom - (bottom - top) * Math.min(num(v), ymax) / ymax;
    let svg = `<line x1="${X0}" y1="${bottom}" x2="${XR}" y2="${bottom}" class="axis"/><line x1="${X0}" y1="${top}" x2="${X0}" y2="${bottom}" class="axis"/>`;
    for (let i = 0; i <= 4; i++) {
      const v = ymax * i / 4, yy = py(v);
      svg += `<line x1="${X0}" y1="${yy}" x2="${XR}" y2="${yy}" class="grid"/>` + text(X0 - 8, yy + 4, String(Number(v.toPrecision(2))), 'muted small', {'text-anchor': 'end'});
    }
    svg += text(XR, bottom + 30, `${ui('step')} 0 … ${last}`, 'muted small', {'text-anchor': 'end'});
    const rows = [];
    const window_ = runs[0].window;
    for (const r of runs) {
      let d = '', pen = false;
      r.curve_steps.forEach((s, i) => {
        const v = num(r.error[i]);
        if (!Number.isFinite(v)) { pen = false; return; }
        d += `${pen ? 'L' : 'M'}${px(s).toFixed(1)} ${py(v).toFixed(1)} `; pen = true;
      });
      svg += `<path class="curve ${r.arch}${r.seed === seed0 ? '' : ' thin'}" d="${d}" stroke-dasharray="${DASHES[depths.indexOf(r.depth) % DASHES.length]}" ${attr({'data-run': r.name})}/>`;
      const i = stepIndexOf(r.curve_steps);
      const v = i < 0 ? NaN : r.error[i];
      rows.push(`<tr><th scope="row">${esc(r.name)}</th><td>${esc(archName(r.arch))}</td><td>${r.depth}</td><td>${r.seed}</td>` +
                (i < 0 ? `<td>${esc(ui('not_recorded', {what: r.name, step: state.step}))}</td>` : cell(v, {'data-run': r.name})) + '</tr>');
    }
    for (const lab of labels) lab.y = py(lab.v) + 0.3 * small;
    spread(labels, Math.max(17, LINE * small), top + 0.7 * small, H - 0.3 * small - 4);
    for (const lab of labels) svg += text(XR + 10, lab.y, lab.s, 'small ' + lab.arch, {'data-run': lab.run});
    svg += `<line class="cursor" x1="${px(state.step)}" x2="${px(state.step)}" y1="${top}" y2="${bottom}"/>`;
    out.svg = svg;
    const thin = uniq(runs.map((r) => r.seed)).length - 1;  // the other seeds' curves are thin: said only if drawn
    out.legend = esc(fill(ui('smoothed'), {window: window_})) + (thin ? ` · ${esc(ui('thin_lines', {m: thin}))}` : '');
    table([ui('run'), ui('net'), ui('depth'), ui('seed'), ui('error')], rows);
  }

  function stepIndexOf(steps) { return steps.indexOf(state.step); }

  function bars(groups, series, values, dots, label) {
    // groups: [names]; series: [{key, cls}]; values(g, key) -> value; dots(g, key) -> [values]
    const top = Math.max(20, Math.ceil(fonts.small)), bottom = 290;
    const all = [];
    groups.forEach((g, gi) => series.forEach((s) => { all.push(num(values(gi, s.key))); dots(gi, s.key).forEach((v) => all.push(num(v))); }));
    const finite = all.filter(Number.isFinite);
    const ymax = finite.length ? Math.max(...finite) * 1.1 || 1 : 1;
    const py = (v) => bottom - (bottom - top) * Math.max(0, Math.min(num(v), ymax)) / ymax;
    const ticks = [0, 1, 2, 3, 4].map((i) => ymax * i / 4);
    const x0 = Math.max(X0, widest(ticks.map(fmt), fonts.small) + 16);  // room for the axis's numbers
    const slot = (X1 - x0) / groups.length;
    const names = groups.map((name, gi) => label(name, gi));  // every n-th group named, n such that the names do not touch
    const every = Math.max(Math.ceil(groups.length / 24), Math.ceil((widest(names, fonts.small) + 0.6 * fonts.small) / slot));
    const bw = Math.min(slot / (series.length + 1), 40);
    let svg = `<line x1="${x0}" y1="${bottom}" x2="${X1}" y2="${bottom}" class="axis"/><line x1="${x0}" y1="${top}" x2="${x0}" y2="${bottom}" class="axis"/>`;
    for (const v of ticks) {
      svg += `<line x1="${x0}" y1="${py(v)}" x2="${X1}" y2="${py(v)}" class="grid"/>` + text(x0 - 8, py(v) + 0.3 * fonts.small, fmt(v), 'muted small', {'text-anchor': 'end'});
    }
    groups.forEach((name, gi) => {
      series.forEach((s, si) => {
        const v = values(gi, s.key);
        const x = x0 + slot * gi + (slot - bw * series.length) / 2 + bw * si;
        if (Number.isFinite(num(v))) {
          svg += `<rect class="bar ${s.cls}" x="${x}" y="${py(v)}" width="${bw * 0.9}" height="${bottom - py(v)}" ${attr({'data-series': s.key, 'data-index': gi, 'data-value': exact(v)})}><title>${esc(name)}: ${esc(exact(v))}</title></rect>`;
        }
        const spread = [v, ...dots(gi, s.key)].map(num).filter(Number.isFinite);
        if (spread.length > 1) {  // the seed spread: lowest to highest of the recorded values
          svg += `<line class="whisker" x1="${x + bw * 0.45}" x2="${x + bw * 0.45}" y1="${py(Math.min(...spread))}" y2="${py(Math.max(...spread))}"/>`;
        }
        for (const d of dots(gi, s.key)) if (Number.isFinite(num(d))) svg += `<circle class="dot" cx="${x + bw * 0.45}" cy="${py(d)}" r="4" data-value="${esc(exact(d))}"/>`;
      });
      if (gi % every === 0) svg += text(x0 + slot * (gi + 0.5), bottom + 8 + fonts.small, names[gi], 'muted small', {'text-anchor': 'middle'});
    });
    return svg;
  }

  function drawResponses(fam, out) {
    const {runs, first, seed0} = pairRuns(fam);
    if (!runs.length) { out.status.push(ui('not_trained', {what: `${ui('depth_blocks', {n: state.depth})}, ${state.act}`, trained: trainedList(fam, null)})); return; }
    const archs = ARCHS.filter((a) => shown(a));
    const series = [];
    for (const arch of archs) {
      if (!(arch in first)) { out.status.push(ui('not_trained', {what: `${archName(arch)}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}`, trained: trainedList(fam, arch)})); continue; }
      if (first[arch].steps.indexOf(state.step) < 0) { out.status.push(ui('not_recorded', {what: archName(arch), step: state.step})); continue; }
      series.push({key: arch, cls: arch});
    }
    if (!series.length) return;
    const ref = first[series[0].key];
    const L = ref.blocks;
    const others = (arch) => runs.filter((r) => r.arch === arch && r.seed !== seed0);
    const at = (r) => r.steps.indexOf(state.step);
    out.svg = bars(ref.layers, series, (gi, arch) => first[arch].ratio[at(first[arch])][gi],
      (gi, arch) => others(arch).filter((r) => at(r) >= 0 && gi < r.blocks).map((r) => r.ratio[at(r)][gi]),
      (name, gi) => String(gi + 1));
    out.legend = series.map((s) => `<span class="${s.cls}">■ ${esc(archName(s.key))}</span>`).join(' · ') +
      ` · ${esc(ui('ratio'))}${otherSeeds(uniq(runs.map((r) => r.seed)).length)}`;
    const rows = [];
    for (let l = 0; l < L; l++) {
      for (const s of series) {
        for (const r of runs.filter((x) => x.arch === s.key)) {
          const k = at(r);
          if (k < 0 || l >= r.blocks) continue;
          rows.push(`<tr><th scope="row">${esc(r.layers[l])}</th><td>${esc(archName(r.arch))}</td><td>${r.seed}</td>` +
                    cell(r.ratio[k][l], {'data-run': r.name, 'data-block': l, 'data-kind': 'ratio'}) +
                    cell(r.branch_std[k][l], {'data-run': r.name, 'data-block': l, 'data-kind': 'branch_std'}) + '</tr>');
        }
      }
    }
    table([S().common.block, ui('net'), ui('seed'), ui('ratio'), ui('branch_std')], rows);
  }

  function drawLayernorm(fam, out) {
    const seed0 = firstSeed(fam.runs);
    const norms = uniq(fam.runs.map((r) => r.norm)).sort();
    const pick = {};  // per norm, the first seed's run with the fewest warm-up steps (init is the same)
    for (const norm of norms) {
      const cands = fam.runs.filter((r) => r.norm === norm && r.seed === seed0).sort((a, b) => a.warmup_steps - b.warmup_steps || a.name.localeCompare(b.name));
      if (cands.length) pick[norm] = cands[0];
    }
    const members = (norm) => fam.runs.filter((r) => r.norm === norm && r.warmup_steps === pick[norm].warmup_steps);
    const series = Object.keys(pick).map((norm) => ({key: norm, cls: norm === 'post_ln' ? 'plain' : norm === 'pre_ln' ? 'residual' : 'warn'}));
    const ref = pick[series[0].key];
    out.svg = bars(ref.layers, series, (gi, norm) => pick[norm].init_ffn_grad_norm[gi],
      (gi, norm) => members(norm).filter((r) => r.seed !== seed0).map((r) => r.init_ffn_grad_norm[gi]), (name) => name.replace(/^(\w)\w*\.(\d+)$/, (m, a, n) => a.toUpperCase() + (parseInt(n, 10) + 1)));
    const names = {post_ln: S().views.layernorm.legend_post, pre_ln: S().views.layernorm.legend_pre};
    out.legend = series.map((s) => `<span class="${s.cls}">■ ${esc(names[s.key] || s.key)}</span>`).join(' · ') +
      otherSeeds(uniq(fam.runs.map((r) => r.seed)).length);
    out.status.push(ui('at_init', {n: ref.batches}));
    const rows = [];
    ref.layers.forEach((layer, l) => {
      for (const s of series) {
        for (const r of members(s.key)) {
          rows.push(`<tr><th scope="row">${esc(layer)}</th><td>${esc(names[s.key] || s.key)}</td><td>${esc(r.name)}</td><td>${r.seed}</td>` +
                    cell(r.init_ffn_grad_norm[l], {'data-run': r.name, 'data-layer': l}) + '</tr>');
        }
      }
    });
    table([S().common.layer, ui('net'), ui('run'), ui('seed'), S().views.layernorm.caption[0]], rows);
  }

  // The depth x time map: an image of the exported cells (one pixel each, scaled without smoothing), coloured on the
  // exported scale with the exported colours; blank (transparent) where nothing was recorded.
  const mapImages = new Map();  // run digest + theme -> the image's data URL
  function mapImage(run, scale) {
    const key = [run.digest, state.theme, scale].join(' ');
    if (mapImages.has(key)) return mapImages.get(key);
    const rows = run.cells.length, cols = run.cells[0].length;
    const canvas = document.createElement('canvas');
    canvas.width = cols; canvas.height = rows;
    const ctx = canvas.getContext('2d');
    const img = ctx.createImageData(cols, rows);
    const stops = D.map_colors.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
    const warn = D.themes[state.theme].warn;
    const warnRgb = [1, 3, 5].map((i) => parseInt(warn.slice(i, i + 2), 16));
    const [lo, hi] = scale;
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        const x = num(run.cells[r][c]), o = 4 * (r * cols + c);
        if (Number.isNaN(x)) { img.data[o + 3] = 0; continue; }
        let rgb;
        if (x === Infinity) rgb = warnRgb;
        else {
          const t = x > 0 ? Math.min(1, Math.max(0, (Math.log10(x) - lo) / (hi - lo))) : 0;
          const p = t * (stops.length - 1), i = Math.min(Math.floor(p), stops.length - 2), f = p - i;
          rgb = stops[i].map((v, j) => Math.round(v * (1 - f) + stops[i + 1][j] * f));
        }
        img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    const url = canvas.toDataURL('image/png');
    mapImages.set(key, url);
    return url;
  }
  const rowName = (row) => (Array.isArray(row) ? ui('map_rows', {first: row[0], last: row[1], n: row[2]}) : row);
  function drawMap(fam, out) {
    const g = flowGroup(fam);
    if (!g) { out.status.push(notTrained(fam, ARCHS.filter(shown))); table([], []); return; }
    untrainedStatus(fam, g, out);
    const archs = ['residual', 'plain'].filter((a) => shown(a) && a in g.runs);
    if (!archs.length) { table([], []); return; }
    const runs = archs.map((a) => fam.runs[g.runs[a]]);
    const {big, small} = fonts;
    const lh = LINE * small;
    const labelCount = (rows, h) => Math.max(2, Math.min(10, rows.length, Math.floor(h / (lh * 1.15))));
    const mapH = archs.length > 1 ? 150 : 220;
    // the rows' names left of the maps (at most 10 a map), the scale's decades and its heading right of them
    const picks = (n, m) => uniq(Array.from({length: m}, (_, i) => Math.round(i * (n - 1) / Math.max(m - 1, 1))));
    const names = runs.flatMap((r) => picks(r.rows.length, labelCount(r.rows, mapH)).map((i) => rowName(r.rows[i])));
    const maxLabel = W * 0.3;
    const x0 = Math.min(maxLabel, Math.max(X0, widest(names, small) + 16));
    const scaleWords = [pow10(g.scale[0]), pow10(g.scale[1]), S().views.map.color_axis, S().views.map.loss_axis];
    const x1 = W - 30 - widest(scaleWords, small) - 22;
    const first = Math.min(...runs.map((r) => num(r.edges[0]))), last = Math.max(...runs.map((r) => num(r.edges[r.edges.length - 1])));
    const px = (s) => x0 + (x1 - x0) * (s - first) / Math.max(last - first, 1e-9);
    let svg = '', y = Math.max(20, Math.ceil(big)) + 6;
    const k = timeline().indexOf(state.step);
    const rowsOut = [];
    runs.forEach((run, i) => {
      const arch = archs[i];
      svg += text(x0, y - 6, archName(arch) + (run.name === arch ? '' : ` · ${run.name}`), arch, {'data-arch': arch});
      const left = px(num(run.edges[0])), right = px(num(run.edges[run.edges.length - 1]));
      svg += `<image class="map" href="${mapImage(run, g.scale)}" x="${left.toFixed(1)}" y="${y}" width="${Math.max(right - left, 1).toFixed(1)}" height="${mapH}" preserveAspectRatio="none" style="image-rendering: pixelated" ${attr({'data-arch': arch})}/>`;
      svg += `<rect x="${left.toFixed(1)}" y="${y}" width="${Math.max(right - left, 1).toFixed(1)}" height="${mapH}" class="frame"/>`;
      const rowH = mapH / run.rows.length;
      for (const r of picks(run.rows.length, labelCount(run.rows, mapH))) {
        const yy = y + (r + 0.5) * rowH;
        svg += text(x0 - 8, yy + 0.35 * small, rowName(run.rows[r]), 'muted small', {'text-anchor': 'end'});
      }
      // the colour bar: the scale's colours, bottom (10^low) to top (10^high), its decades labelled
      const [lo, hi] = g.scale;
      const grad = `mapgrad-${i}`;
      svg += `<defs><linearGradient id="${grad}" x1="0" y1="1" x2="0" y2="0">` +
        D.map_colors.map((c, j) => `<stop offset="${j / (D.map_colors.length - 1)}" stop-color="${c}"/>`).join('') + '</linearGradient></defs>';
      svg += `<rect x="${x1 + 12}" y="${y}" width="14" height="${mapH}" fill="url(#${grad})"/>`;
      const every = Math.max(1, Math.ceil((hi - lo) / Math.max(1, Math.floor(mapH / (lh * 1.2)))));
      for (let e = hi; e >= lo; e -= every) {
        const yy = y + mapH * (hi - e) / (hi - lo);
        svg += text(x1 + 32, yy + 0.35 * small, pow10(e), 'muted small');
      }
      if (k >= 0) {
        const steps = mapSteps(run);
        const c = steps.indexOf(state.step);
        if (c >= 0) {
          run.rows.forEach((row, r) => rowsOut.push({r, arch, name: rowName(row), value: run.cells[r][c], run: run.name}));
          svg += `<line class="cursor" x1="${px((num(run.edges[c]) + num(run.edges[c + 1])) / 2)}" x2="${px((num(run.edges[c]) + num(run.edges[c + 1])) / 2)}" y1="${y}" y2="${y + mapH}"/>`;
        }
      }
      y += mapH + lh + 12;
    });
    svg += text(x1, Math.max(20, Math.ceil(big)), S().views.map.color_axis, 'small', {'text-anchor': 'end'});
    // the loss beneath, on the same step axis (the first run's; the twin's too where shown)
    const withLoss = runs.filter((r) => r.loss);
    if (withLoss.length) {
      const lossH = 90, top = y, bottom = y + lossH;
      // the axis the scene draws (scenes.depth_time_map.loss_axis): around the losses, log in whole decades where
      // they span more than one
      const [log, lo, hi] = g.loss_axis || [false, 0, 1];
      const at = (v) => (log ? Math.log10(v) : v);
      const py = (v) => bottom - lossH * Math.min(Math.max((at(num(v)) - lo) / ((hi - lo) || 1), 0), 1);
      const tick = (e) => (log ? pow10(e) : fmt(e));
      svg += `<line x1="${x0}" y1="${bottom}" x2="${x1}" y2="${bottom}" class="axis"/><line x1="${x0}" y1="${top}" x2="${x0}" y2="${bottom}" class="axis"/>`;
      svg += text(x0 - 8, top + 0.35 * small, tick(hi), 'muted small', {'text-anchor': 'end', 'data-loss-tick': 'high'}) + text(x0 - 8, bottom + 0.35 * small, tick(lo), 'muted small', {'text-anchor': 'end', 'data-loss-tick': 'low'});
      for (const r of withLoss) {
        let d = '', pen = false;
        r.loss_steps.forEach((s, i) => {
          const v = num(r.loss[i]);
          if (!Number.isFinite(v)) { pen = false; return; }
          d += `${pen ? 'L' : 'M'}${px(num(s)).toFixed(1)} ${py(v).toFixed(1)} `; pen = true;
        });
        svg += `<path class="curve ${archs[runs.indexOf(r)]}" d="${d}"/>`;
      }
      svg += text(x1 + 12, top + 0.35 * small, S().views.map.loss_axis, 'muted small');
      svg += text(x0, bottom + lh, `${ui('step')} ${fmt(first)}`, 'muted small') + text(x1, bottom + lh, fmt(last), 'muted small', {'text-anchor': 'end'});
      y = bottom + lh + 8;
    }
    out.svg = svg;
    out.height = Math.max(H, y + 8);
    out.legend = esc(ui('map_scale', {low: pow10(g.scale[0]), high: pow10(g.scale[1])}));
    const head = [S().views.map.blocks_axis, ...archs.map(archName)];
    const byRow = new Map();
    for (const row of rowsOut) {
      if (!byRow.has(row.r)) byRow.set(row.r, {name: row.name, cells: {}});
      byRow.get(row.r).cells[row.arch] = row;
    }
    const rows = Array.from(byRow.entries()).map(([r, row]) => `<tr><th scope="row">${esc(row.name)}</th>` +
      archs.map((a) => (row.cells[a] ? cell(row.cells[a].value, {'data-arch': a, 'data-block': r}) : '<td>—</td>')).join('') + '</tr>');
    table(head, rows);
  }
  function mapReadout(e) {  // hover a map: the block (or blocks) and the steps of the cell under the pointer, its value
    const image = e.target.closest && e.target.closest('#chart image.map');
    if (!image || state.view !== 'map') return;
    const fam = family(), g = flowGroup(fam);
    if (!g || !(image.dataset.arch in g.runs)) return;
    const run = fam.runs[g.runs[image.dataset.arch]];
    const box = image.getBoundingClientRect();
    const c = Math.min(run.cells[0].length - 1, Math.max(0, Math.floor((e.clientX - box.left) / box.width * run.cells[0].length)));
    const r = Math.min(run.rows.length - 1, Math.max(0, Math.floor((e.clientY - box.top) / box.height * run.rows.length)));
    const value = run.cells[r][c];
    $('readout').innerHTML = `<span class="${image.dataset.arch}">${esc(ui('map_cell', {block: rowName(run.rows[r]), from: fmt(run.edges[c]), to: fmt(run.edges[c + 1]), value: ''}))}<span class="v" data-value="${esc(exact(value))}">${esc(fmt(value))}</span></span>`;
    $('readout')._html = null;
  }

  function trainedList(fam, arch) {  // "8 sigmoid, 20 sigmoid, ..." of the pairs this family holds for ``arch``
    return uniq(fam.runs.filter((r) => !arch || r.arch === arch).map((r) => `${r.depth} ${r.activation}`)).join(', ') || '—';
  }
  function notTrained(fam, archs) {
    const what = `${archs.map(archName).join(' / ') || '—'}, ${ui('depth_blocks', {n: state.depth})}, ${state.act}, ${ui('seed')} ${state.seed}`;
    return ui('not_trained', {what, trained: trainedList(fam, null)});
  }

  // -- the page ------------------------------------------------------------------------------------
  function applyTheme() {
    const colors = D.themes[state.theme];
    for (const [role, value] of Object.entries(colors)) document.documentElement.style.setProperty('--' + role, value);
    document.documentElement.dataset.theme = state.theme;
    $('theme').value = state.theme;
  }
  function applyLanguage() {
    document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : state.lang;
    $('lang').value = state.lang;
    document.querySelectorAll('[data-ui]').forEach((el) => { el.textContent = ui(el.dataset.ui); });
    document.title = ui('title');
    $('title').textContent = ui('title');
    $('intro').textContent = ui('intro');
    $('tabs').setAttribute('aria-label', ui('views'));
    $('numbers-caption').textContent = ui('numbers');
    buildTabs();
  }
  function buildTabs() {
    $('tabs').innerHTML = VIEWS.map((v) => `<button type="button" role="tab" id="tab-${v}" aria-controls="view" aria-selected="${v === state.view}">${esc(ui('view_' + v))}</button>`).join('');
    VIEWS.forEach((v) => $('tab-' + v).addEventListener('click', () => { stop(); state.view = v; update(); }));
  }
  function options(select, values, label) {
    const html = values.map((v) => `<option value="${esc(v)}">${esc(label ? label(v) : v)}</option>`).join('');
    if (select.innerHTML !== html) select.innerHTML = html;
  }
  function syncControls() {
    const used = CONTROLS[state.view];
    const ids = {family: 'c-family', depth: 'c-depth', act: 'c-act', seed: 'c-seed', arch: 'c-arch', step: 'c-step', block: 'c-block'};
    for (const [key, id] of Object.entries(ids)) $(id).hidden = !used.includes(key);
    $('pulse').hidden = !used.includes('pulse');
    const fam = family();
    options($('family'), families().map((f) => f.id));
    $('family').value = state.family;
    const c = choices(fam);
    options($('depth'), c.depth);
    options($('act'), c.act);
    options($('seed'), c.seed);
    // an untrained depth or activation from the URL stays selected and is reported
    for (const key of ['depth', 'act', 'seed']) {
      const sel = $(key);
      if (state[key] !== null && !c[key].includes(state[key])) {
        sel.insertAdjacentHTML('beforeend', `<option value="${esc(state[key])}">${esc(ui('untrained_option', {value: state[key]}))}</option>`);
      }
      if (state[key] !== null) sel.value = String(state[key]);
    }
    $('show-plain').checked = shown('plain');
    $('show-residual').checked = shown('residual');
    $('show-plain').disabled = !held('plain');  // nothing to show: not offered (and not reported as "not trained")
    $('show-residual').disabled = !held('residual');
  }
  function update() {
    normalise();
    syncControls();
    render();
    writeHash();
  }
  let lastView = null;
  function render() {
    const t0 = performance.now();
    if (state.view !== lastView) { drawn.flow = drawn.chain = null; lastView = state.view; }
    fonts = chartFonts();
    const fam = family();
    const view = state.view;
    const strings = S().views[view];
    $('view-title').textContent = strings.title;
    setHtml($('caption'), strings.caption.map((line) => `<p>${esc(line)}</p>`).join(''));
    const fam_ = fam ? fam.experiment : null;
    $('paper').textContent = D.sources[view] + (fam_ && D.experiments[fam_] ? ' · ' + fam_ + ': ' + D.experiments[fam_] : '');
    const clips = fam_ === 'model' && D.model_clips ? D.model_clips : D.clips;  // a user's model: its own scenes' sections
    const clip = clips[state.lang] && clips[state.lang][view];
    $('clip-wrap').hidden = !clip;
    if (clip) $('clip').href = clip;
    VIEWS.forEach((v) => { const b = $('tab-' + v); if (b) b.setAttribute('aria-selected', String(v === view)); });
    const out = {svg: '', status: [], series: {}, readout: '', legend: '', blocks: 0, height: H};
    const steps = timeline();
    const k = stepIndex(steps);
    if (k >= 0) state.step = steps[k];
    $('step').max = String(Math.max(steps.length - 1, 0));
    $('step').value = String(Math.max(k, 0));
    $('step').setAttribute('aria-valuetext', k >= 0 ? ui('step_of', {step: steps[k], k: k + 1, n: steps.length}) : '—');
    $('step-out').textContent = k >= 0 ? ui('step_of', {step: steps[k], k: k + 1, n: steps.length}) : '—';
    if (!fam) {
      out.status.push(ui('nothing'));
      table([], []);
    } else {
      ({flow: drawFlow, chain: drawChain, degradation: drawDegradation, responses: drawResponses, layernorm: drawLayernorm,
        map: drawMap})[view](fam, out);
    }
    if (out.kept) {  // a step change within the same selection patched the chart and the table in place
      $('chart')._html = document.querySelector('#numbers tbody')._html = null;  // their markup is not the cached one
    } else {
      if (!out.svg) table([], []);
      setHtml($('chart'), out.svg);
      $('chart').setAttribute('viewBox', `0 0 ${W} ${Math.ceil(out.height)}`);
    }
    $('chart').setAttribute('aria-label', strings.title);
    $('status').textContent = out.status.join(' ');
    $('status').classList.toggle('warn', out.status.length > 0 && view !== 'layernorm');
    setHtml($('readout'), out.readout);
    setHtml($('legend'), out.legend);
    if (view === 'chain') {
      $('block').max = String(Math.max(out.blocks - 1, 0));
      $('block').value = String(state.block || 0);
      $('block-out').textContent = out.blocks ? `${(state.block || 0) + 1} / ${out.blocks}` : '—';
    }
    lastSeries = out.series;
    window.explore.lastRenderMs = performance.now() - t0;
  }
  let lastSeries = {};

  function setStepIndex(k) {
    const steps = timeline();
    if (!steps.length) return;
    state.step = steps[Math.max(0, Math.min(steps.length - 1, k))];
    render();
    writeHash();
  }
  function moveStep(delta) {
    const steps = timeline();
    setStepIndex(stepIndex(steps) + delta);
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    $('play').setAttribute('aria-pressed', 'false');
    $('play').textContent = ui('play');
  }
  function play() {
    if (timer !== null) { stop(); return; }
    const steps = timeline();
    if (stepIndex(steps) >= steps.length - 1) setStepIndex(0);
    $('play').setAttribute('aria-pressed', 'true');
    $('play').textContent = ui('pause');
    timer = setInterval(() => {
      const s = timeline();
      const k = stepIndex(s);
      if (k >= s.length - 1) { stop(); return; }
      setStepIndex(k + 1);
    }, Math.max(40, Math.min(400, 8000 / Math.max(steps.length, 1))));  // the whole run in about 8 s
  }
  function pulse() {  // the lecture's pulse: from the loss end to the input end, brightness from the levels drawn
    if (pulseFrame !== null) cancelAnimationFrame(pulseFrame);
    const svg = $('chart');
    const dots = {};
    for (const [arch, s] of Object.entries(lastSeries)) {
      const c = document.createElementNS('http://www.w3.org/2000/svg', 'circle');
      c.setAttribute('class', 'pulse');
      svg.appendChild(c);
      dots[arch] = {c, s};
    }
    const start = performance.now(), duration = 1600;
    const frame = (now) => {
      const t = Math.min(1, (now - start) / duration);
      for (const {c, s} of Object.values(dots)) {
        const x = s.x1 + 40 - t * (s.x1 - s.x0 + 80);
        const pos = Math.max(0, Math.min(s.levels.length - 1, (x - s.x0) / s.slot - 0.5));
        const i = Math.floor(pos), f = pos - i;
        const lv = s.levels[i] * (1 - f) + (s.levels[Math.min(i + 1, s.levels.length - 1)] || 0) * f;
        c.setAttribute('cx', x); c.setAttribute('cy', s.pathY); c.setAttribute('r', 4 + 16 * lv);
        c.setAttribute('fill-opacity', 0.15 + 0.85 * lv);
      }
      if (t < 1) pulseFrame = requestAnimationFrame(frame);
      else { Object.values(dots).forEach(({c}) => c.remove()); pulseFrame = null; }
    };
    pulseFrame = requestAnimationFrame(frame);
  }

  function bind() {
    $('lang').addEventListener('change', () => { state.lang = $('lang').value; applyLanguage(); stop(); update(); });
    $('theme').addEventListener('change', () => { state.theme = $('theme').value; applyTheme(); writeHash(); });
    $('family').addEventListener('change', () => { state.family = $('family').value; state.depth = state.act = state.seed = null; update(); });
    $('depth').addEventListener('change', () => { state.depth = parseInt($('depth').value, 10); update(); });
    $('act').addEventListener('change', () => { state.act = $('act').value; update(); });
    $('seed').addEventListener('change', () => { state.seed = parseInt($('seed').value, 10); update(); });
    const arch = () => {
      const p = $('show-plain').checked, r = $('show-residual').checked;
      state.arch = p && r ? 'both' : p ? 'plain' : r ? 'residual' : 'none';
      update();
    };
    $('show-plain').addEventListener('change', arch);
    $('show-residual').addEventListener('change', arch);
    $('step').addEventListener('input', () => setStepIndex(parseInt($('step').value, 10)));
    $('block').addEventListener('input', () => { state.block = parseInt($('block').value, 10); render(); writeHash(); });
    const pickBlock = (e) => {  // hover or tap a block's column in the chain-rule view
      const hit = e.target.closest && e.target.closest('#chart .hit');
      if (!hit || state.view !== 'chain' || parseInt(hit.dataset.block, 10) === state.block) return;
      state.block = parseInt(hit.dataset.block, 10);
      render();
      writeHash();
    };
    $('chart').addEventListener('pointerover', pickBlock);
    $('chart').addEventListener('pointermove', mapReadout);
    $('chart').addEventListener('click', pickBlock);
    $('play').addEventListener('click', play);
    $('pulse').addEventListener('click', pulse);
    document.addEventListener('keydown', (e) => {
      const t = e.target;
      if (e.altKey || e.ctrlKey || e.metaKey) return;
      if (t && (t.tagName === 'SELECT' || (t.tagName === 'INPUT' && t.type === 'range'))) return;  // their own arrows
      if (!CONTROLS[state.view].includes('step')) return;
      const moves = {ArrowRight: 1, ArrowLeft: -1};
      if (e.key in moves) { e.preventDefault(); stop(); moveStep(moves[e.key]); }
      else if (e.key === 'Home') { e.preventDefault(); stop(); setStepIndex(0); }
      else if (e.key === 'End') { e.preventDefault(); stop(); setStepIndex(timeline().length - 1); }
    });
    window.addEventListener('hashchange', () => { stop(); readHash(); applyTheme(); applyLanguage(); update(); });
    window.addEventListener('resize', () => {  // a phone turned, a window narrowed: the chart's text sizes may change
      const now = chartFonts();
      if (now.big !== fonts.big || now.small !== fonts.small) render();
    });
  }

  window.explore = {state, render, update, setStepIndex, timeline, lastRenderMs: 0};
  readHash();
  applyTheme();
  applyLanguage();
  bind();
  update();
  document.documentElement.dataset.ready = 'true';
})();
