/**
 * The layout of a provenance graph: digests and steps as nodes in layers (top to bottom, so long
 * chains stay readable on a phone), edges input digest → step → output digest. A digest's layer is
 * where it first appears: produced by a step it sits below that step, otherwise in the top row.
 * Within a layer, nodes are ordered by the mean position of their neighbours in the layer above (one
 * barycentre sweep), which keeps edges short and mostly uncrossed for the chains provenance records.
 * An edge that skips layers (or goes up) is marked `arc`: it is drawn as an arc beside the nodes it
 * passes, in the room the layout leaves on the right.
 */

export interface StepInput {
  step: number;
  action: string;
  inputs: readonly string[];
  outputs: readonly string[];
}

export interface LayoutNode {
  id: string;
  kind: 'step' | 'digest';
  /** The step number or the digest. */
  key: string | number;
  layer: number;
  order: number;
  x: number;
  y: number;
}

export interface LayoutEdge {
  from: string;
  to: string;
  /** Which side of the step the digest is on. */
  role: 'input' | 'output';
  /** Layers between its ends (1: adjacent). */
  span: number;
  /** Drawn as an arc on the right: it skips layers, or goes up (provenance that names a digest again). */
  arc: boolean;
}

export interface Layout {
  nodes: LayoutNode[];
  edges: LayoutEdge[];
  width: number;
  height: number;
}

export interface LayoutOptions {
  nodeWidth: number;
  nodeHeight: number;
  /** Between nodes of one layer. */
  columnGap: number;
  /** Between layers. */
  rowGap: number;
  margin: number;
  /** Room on the right for the arcs of long edges: base + per layer skipped. */
  arcBase: number;
  arcPerLayer: number;
}

export const DEFAULT_LAYOUT: LayoutOptions = {
  nodeWidth: 236,
  nodeHeight: 56,
  columnGap: 24,
  rowGap: 34,
  margin: 10,
  arcBase: 26,
  arcPerLayer: 14,
};

/** How far right of its nodes the arc of an edge over `span` layers reaches. */
export function arcDepth(span: number, opts: LayoutOptions = DEFAULT_LAYOUT): number {
  return opts.arcBase + opts.arcPerLayer * Math.max(0, span - 2);
}

export const stepId = (n: number) => `s:${n}`;
export const digestId = (d: string) => `d:${d}`;

export function layoutProvenance(steps: readonly StepInput[], opts: LayoutOptions = DEFAULT_LAYOUT): Layout {
  const layer = new Map<string, number>();
  const firstSeen = new Map<string, number>();
  const edges: LayoutEdge[] = [];
  let seen = 0;
  const touch = (id: string) => {
    if (!firstSeen.has(id)) firstSeen.set(id, seen++);
  };
  for (const s of [...steps].sort((a, b) => a.step - b.step)) {
    const sid = stepId(s.step);
    let l = 1;
    for (const d of s.inputs) {
      const id = digestId(d);
      if (!layer.has(id)) layer.set(id, 0);
      touch(id);
      l = Math.max(l, (layer.get(id) as number) + 1);
    }
    layer.set(sid, l);
    touch(sid);
    for (const d of s.inputs) edges.push({ from: digestId(d), to: sid, role: 'input', span: 0, arc: false });
    for (const d of s.outputs) {
      const id = digestId(d);
      if (!layer.has(id)) layer.set(id, l + 1);
      touch(id);
      edges.push({ from: sid, to: id, role: 'output', span: 0, arc: false });
    }
  }
  const sparse: string[][] = [];
  for (const [id, l] of layer) (sparse[l] ??= []).push(id);
  // Without empty columns (a graph whose steps have no inputs has nothing at the left edge).
  const layers = sparse.filter((ids) => ids !== undefined && ids.length > 0);
  layers.forEach((ids, l) => {
    ids.sort((x, y) => (firstSeen.get(x) as number) - (firstSeen.get(y) as number));
    for (const id of ids) layer.set(id, l);
  });
  // One barycentre sweep, left to right.
  const position = new Map<string, number>();
  const preds = new Map<string, string[]>();
  for (const e of edges) (preds.get(e.to) ?? preds.set(e.to, []).get(e.to))?.push(e.from);
  for (let l = 0; l < layers.length; l++) {
    const ids = layers[l] ?? [];
    if (l > 0) {
      const score = (id: string) => {
        const ps = (preds.get(id) ?? []).filter((p) => position.has(p) && (layer.get(p) as number) < l);
        if (ps.length === 0) return Number.POSITIVE_INFINITY;
        return ps.reduce((a, p) => a + (position.get(p) as number), 0) / ps.length;
      };
      const scored = ids.map((id, i) => ({ id, s: score(id), i }));
      scored.sort((a, b) => (a.s === b.s ? a.i - b.i : a.s - b.s));
      layers[l] = scored.map((x) => x.id);
    }
    for (const [i, id] of (layers[l] ?? []).entries()) position.set(id, i);
  }
  for (const e of edges) {
    const down = (layer.get(e.to) as number) - (layer.get(e.from) as number);
    e.span = Math.abs(down);
    e.arc = down !== 1;
  }
  const widest = Math.max(1, ...layers.map((ids) => ids.length));
  const rowH = opts.nodeHeight + opts.rowGap;
  const colW = opts.nodeWidth + opts.columnGap;
  const nodes: LayoutNode[] = [];
  layers.forEach((ids, l) => {
    // Centre each row against the widest one.
    const left = ((widest - ids.length) * colW) / 2;
    ids.forEach((id, order) => {
      const kind = id.startsWith('s:') ? 'step' : 'digest';
      nodes.push({
        id,
        kind,
        key: kind === 'step' ? Number(id.slice(2)) : id.slice(2),
        layer: l,
        order,
        x: opts.margin + left + order * colW,
        y: opts.margin + l * rowH,
      });
    });
  });
  const arcs = edges.filter((e) => e.arc);
  const arcRoom = arcs.length > 0 ? arcDepth(Math.max(...arcs.map((e) => e.span)), opts) + 8 : 0;
  return {
    nodes,
    edges,
    width: opts.margin * 2 + widest * colW - opts.columnGap + arcRoom,
    height: opts.margin * 2 + Math.max(1, layers.length) * rowH - opts.rowGap,
  };
}
