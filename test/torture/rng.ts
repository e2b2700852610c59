/** A small seeded generator (mulberry32): the crash campaign is reproducible from its seed. */
export interface Rng {
  next(): number;
  int(n: number): number;
  range(min: number, max: number): number;
  chance(p: number): boolean;
  pick<T>(list: readonly T[]): T;
  weighted<T>(choices: ReadonlyArray<readonly [T, number]>): T | undefined;
  /** A fresh 32-bit seed for a sub-stream. */
  seed(): number;
}

export function rng(seed: number): Rng {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return {
    next,
    int,
    range: (min, max) => min + int(max - min + 1),
    chance: (p) => next() < p,
    pick: (list) => list[int(list.length)] as (typeof list)[number],
    weighted: (choices) => {
      const total = choices.reduce((n, [, w]) => n + w, 0);
      if (total <= 0) return undefined;
      let r = next() * total;
      for (const [v, w] of choices) {
        r -= w;
        if (r < 0) return v;
      }
      return choices[choices.length - 1]?.[0];
    },
    seed: () => (next() * 4294967296) >>> 0,
  };
}

/** Pseudo-random bytes from a seed, `size` bytes in chunks of `chunk` (fast: xorshift over 32-bit words). */
export function* seededBytes(seed: number, size: number, chunk = 64 * 1024): Generator<Buffer> {
  let x = seed >>> 0 || 0x9e3779b9;
  for (let off = 0; off < size; off += chunk) {
    const n = Math.min(chunk, size - off);
    const words = new Uint32Array(Math.ceil(n / 4));
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      words[i] = x >>> 0;
    }
    yield Buffer.from(words.buffer, 0, n);
  }
}
