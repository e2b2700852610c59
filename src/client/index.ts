/**
 * `alp/client`: the typed HTTP client of an ALP server. Browser-safe (fetch and web streams only);
 * Node's file and stream helpers are in `./node.ts`.
 *
 *   const alp = new AlpClient({ url: 'http://127.0.0.1:8787', token: process.env.ALP_TOKEN });
 *   const v1 = await alp.createArtifact({ name: 'deploy', filename: 'deploy.sh', kind: 'script' }, 'echo hi\n');
 *   await alp.propose(v1.artifact_id, v1.version);
 *   const text = await (await alp.getContent(v1.artifact_id, 1)).text();   // re-hashed, or IntegrityError
 */
export type { UploadBody, UploadSource } from './body.ts';
export { AlpClient, type AlpClientOptions, type DownloadOptions, newIdempotencyKey, type RangeChunk } from './client.ts';
export { type Digest, fromReprDigest, toReprDigest } from './digest.ts';
export { type RepresentationInfo, VerifiedDownload } from './download.ts';
export {
  AlpError,
  AlpHttpError,
  AlpNetworkError,
  type ErrorCode,
  HttpIntegrityError,
  type HttpProblemFields,
  IntegrityError,
} from './errors.ts';
export { type RetryOptions, retryAfterMs } from './http.ts';
export { JsSha256, jsSha256, type Sha256, type Sha256Factory } from './sha256.ts';
export type * from './types.ts';
