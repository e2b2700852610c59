/**
 * The retention scan's digest finder: the scanner lives in core/digest-scan.ts (the write path's
 * reference index uses the same one, system/indexed-content.ts), re-exported here for the scan.
 */
export {
  DigestScanner,
  MAX_DECOMPRESSED_BYTES,
  ReferenceScanner,
  type ReferenceScannerOptions,
  SCAN_CHUNK_BYTES,
  scanBuffer,
  scanForDigests,
} from '../core/digest-scan.ts';
