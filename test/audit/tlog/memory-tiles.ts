/**
 * A tile store in memory for the tlog tests: keeps, per (level, index), the widest tile written (as a
 * table or bucket would keep the latest partial tile) and counts the tiles read, so a test can show
 * how many stored items a proof costs.
 */
import type { Tile, TileAddress, TileReader } from '../../../src/audit/tlog/tiles.ts';

export class MemoryTiles implements TileReader {
  readonly tiles = new Map<string, Tile>();
  tilesRead = 0;
  batches = 0;

  async readTiles(addresses: readonly TileAddress[]): Promise<Uint8Array[]> {
    this.batches++;
    return addresses.map((a) => {
      const tile = this.tiles.get(`${a.level}/${a.index}`);
      if (!tile || tile.width < a.width) throw new Error(`tile ${a.level}/${a.index} (width ${a.width}) is not stored`);
      this.tilesRead++;
      return tile.data;
    });
  }

  write(tiles: readonly Tile[]): void {
    for (const t of tiles) {
      const key = `${t.level}/${t.index}`;
      const had = this.tiles.get(key);
      if (had && had.width > t.width) throw new Error(`tile ${key} would shrink from ${had.width} to ${t.width}`);
      if (had && Buffer.compare(had.data, t.data.subarray(0, had.data.length)) !== 0) throw new Error(`tile ${key} was rewritten`);
      this.tiles.set(key, t);
    }
  }

  resetCounts(): void {
    this.tilesRead = 0;
    this.batches = 0;
  }
}
