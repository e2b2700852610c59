import path from 'node:path';
import { InvalidInput, UsageError } from './errors.ts';

export type MetadataConfig =
  | { engine: 'sqlite'; path: string; synchronous?: 'FULL' | 'NORMAL' }
  | { engine: 'dynamodb'; table: string; region: string; endpoint?: string };

export type ContentConfig =
  | { engine: 'fs'; root: string }
  | { engine: 's3'; bucket: string; prefix: string; region: string; endpoint?: string };

export interface StorageConfig {
  metadata: MetadataConfig;
  content: ContentConfig;
}

export const DEFAULT_DATA_DIR = './alp-data';

/**
 * A setting from the environment that must be a whole number within [min, max] (default 0 … 2^53 − 1):
 * `fallback` when unset or empty, INVALID naming it otherwise — a server reads its settings before it
 * listens, so a typo refuses the start instead of quietly meaning the default.
 */
export function wholeNumberFromEnv(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  range: { min?: number; max?: number; unit?: string } = {},
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const { min = 0, max = Number.MAX_SAFE_INTEGER, unit = '' } = range;
  const n = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < min || n > max)
    throw new InvalidInput(
      `${name} must be a whole number${unit ? ` of ${unit}` : ''} ${max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `${min} … ${max}`}, got ${JSON.stringify(raw)}`,
    );
  return n;
}

/** A tuning knob from the environment: a positive integer, or undefined (the default applies). */
export function positiveEnv(v: string | undefined): number | undefined {
  const n = Number(v);
  return Number.isInteger(n) && n > 0 ? n : undefined;
}
const DEFAULT_REGION = 'us-east-1';

/** `sqlite:PATH` (relative to cwd) or `dynamodb://TABLE?region=R&endpoint=URL`. */
export function parseMetadataUrl(text: string, cwd = process.cwd()): MetadataConfig {
  if (text.startsWith('sqlite:')) {
    const p = text.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (!p) throw new UsageError('sqlite: URL needs a file path, e.g. sqlite:./alp-data/alp.db');
    return { engine: 'sqlite', path: path.resolve(cwd, p) };
  }
  if (text.startsWith('dynamodb://')) {
    const url = parseUrl(text);
    const table = decodeURIComponent(url.hostname || url.pathname.replace(/^\/+/, ''));
    if (!/^[A-Za-z0-9_.-]{3,255}$/.test(table)) throw new UsageError(`invalid DynamoDB table name in ${text}`);
    const endpoint = url.searchParams.get('endpoint') ?? undefined;
    return {
      engine: 'dynamodb',
      table,
      region: url.searchParams.get('region') ?? process.env.AWS_REGION ?? DEFAULT_REGION,
      ...(endpoint ? { endpoint: checkEndpoint(endpoint) } : {}),
    };
  }
  throw new UsageError(`unknown metadata URL ${JSON.stringify(text)}: use sqlite:PATH or dynamodb://TABLE?region=R`);
}

/** `file:PATH` (relative to cwd) or `s3://BUCKET[/PREFIX]?region=R&endpoint=URL`. */
export function parseContentUrl(text: string, cwd = process.cwd()): ContentConfig {
  if (text.startsWith('file:')) {
    const p = text.slice('file:'.length).replace(/^\/\/(?=\/)/, '');
    if (!p) throw new UsageError('file: URL needs a directory, e.g. file:./alp-data/content');
    return { engine: 'fs', root: path.resolve(cwd, p) };
  }
  if (text.startsWith('s3://')) {
    const url = parseUrl(text);
    const bucket = url.hostname;
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw new UsageError(`invalid S3 bucket name in ${text}`);
    let prefix = decodeURIComponent(url.pathname.replace(/^\/+/, ''));
    if (prefix && !prefix.endsWith('/')) prefix += '/';
    const endpoint = url.searchParams.get('endpoint') ?? undefined;
    return {
      engine: 's3',
      bucket,
      prefix,
      region: url.searchParams.get('region') ?? process.env.AWS_REGION ?? DEFAULT_REGION,
      ...(endpoint ? { endpoint: checkEndpoint(endpoint) } : {}),
    };
  }
  throw new UsageError(`unknown content URL ${JSON.stringify(text)}: use file:DIR or s3://BUCKET[/PREFIX]`);
}

export interface StorageOptions {
  data?: string | undefined;
  metadata?: string | undefined;
  content?: string | undefined;
}

/**
 * Flags win over environment; `--metadata`/`--content` (or ALP_METADATA/ALP_CONTENT) win over the
 * `--data` shorthand (or ALP_DATA), which defaults to ./alp-data.
 */
export function resolveStorageConfig(opts: StorageOptions, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): StorageConfig {
  const dataDir = path.resolve(cwd, opts.data ?? env.ALP_DATA ?? DEFAULT_DATA_DIR);
  const metadataUrl = opts.metadata ?? (opts.data ? undefined : env.ALP_METADATA);
  const contentUrl = opts.content ?? (opts.data ? undefined : env.ALP_CONTENT);
  return {
    metadata: metadataUrl ? parseMetadataUrl(metadataUrl, cwd) : { engine: 'sqlite', path: path.join(dataDir, 'alp.db') },
    content: contentUrl ? parseContentUrl(contentUrl, cwd) : { engine: 'fs', root: path.join(dataDir, 'content') },
  };
}

export function describeMetadata(c: MetadataConfig): string {
  return c.engine === 'sqlite'
    ? `sqlite:${c.path}`
    : `dynamodb://${c.table}?region=${c.region}${c.endpoint ? `&endpoint=${c.endpoint}` : ''}`;
}

export function describeContent(c: ContentConfig): string {
  return c.engine === 'fs'
    ? `file:${c.root}`
    : `s3://${c.bucket}/${c.prefix}?region=${c.region}${c.endpoint ? `&endpoint=${c.endpoint}` : ''}`;
}

function parseUrl(text: string): URL {
  try {
    return new URL(text);
  } catch {
    throw new UsageError(`malformed URL ${JSON.stringify(text)}`);
  }
}

function checkEndpoint(endpoint: string): string {
  const u = parseUrl(endpoint);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`endpoint must be http(s): ${endpoint}`);
  return endpoint;
}
