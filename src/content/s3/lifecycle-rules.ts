/**
 * The S3 engine's bucket lifecycle rules (ContentStore.getLifecycleRules / putLifecycleRules). A bucket
 * has one lifecycle configuration shared by every owner; this store's rules carry IDs in its own
 * namespace (derived from bucket and prefix) and prefixes under its own prefix, so replacing them keeps
 * every rule of other owners (another prefix, another tool) as it is.
 */
import { createHash } from 'node:crypto';
import {
  DeleteBucketLifecycleCommand,
  GetBucketLifecycleConfigurationCommand,
  PutBucketLifecycleConfigurationCommand,
  type S3Client,
  type LifecycleRule as S3LifecycleRule,
} from '@aws-sdk/client-s3';
import { InternalError, InvalidInput } from '../../core/errors.ts';
import { validateListPrefix } from '../../core/object-keys.ts';
import type { LifecycleRule } from '../content-store.ts';
import { errorCode, isUnsupported, mapS3Error } from './errors.ts';

/** The S3 endpoint does not implement bucket lifecycle configuration (s3rver, some S3 clones). */
export class LifecycleNotSupported extends InternalError {
  constructor(bucket: string, cause: unknown) {
    super(`the S3 endpoint does not implement bucket lifecycle configuration (bucket ${bucket}): apply the rules another way`, { cause });
  }
}

export class BucketLifecycleRules {
  private readonly namespace: string;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly prefix: string,
  ) {
    this.namespace = `alp-${createHash('sha256').update(`${bucket}/${prefix}`).digest('hex').slice(0, 12)}-`;
  }

  /** This store's rules (rules of other owners in the same bucket are not shown). */
  async get(): Promise<LifecycleRule[]> {
    return (await this.readBucketRules()).filter((r) => this.owns(r)).map((r) => this.fromS3Rule(r));
  }

  /** Replaces this store's rules with `rules`, keeping every other owner's; idempotent; [] removes them. */
  async put(rules: LifecycleRule[]): Promise<void> {
    const ids = new Set<string>();
    for (const r of rules) {
      validateRule(r);
      if (ids.has(r.id)) throw new InvalidInput(`duplicate lifecycle rule id ${r.id}`);
      ids.add(r.id);
    }
    const foreign = (await this.readBucketRules()).filter((r) => !this.owns(r));
    const all = [...foreign, ...rules.map((r) => this.toS3Rule(r))];
    try {
      if (all.length === 0) await this.client.send(new DeleteBucketLifecycleCommand({ Bucket: this.bucket }));
      else
        await this.client.send(new PutBucketLifecycleConfigurationCommand({ Bucket: this.bucket, LifecycleConfiguration: { Rules: all } }));
    } catch (e) {
      if (isUnsupported(e)) throw new LifecycleNotSupported(this.bucket, e);
      throw mapS3Error(e, '', this.bucket);
    }
  }

  private async readBucketRules(): Promise<S3LifecycleRule[]> {
    try {
      const out = await this.client.send(new GetBucketLifecycleConfigurationCommand({ Bucket: this.bucket }));
      return out.Rules ?? [];
    } catch (e) {
      if (errorCode(e) === 'NoSuchLifecycleConfiguration') return [];
      if (isUnsupported(e)) throw new LifecycleNotSupported(this.bucket, e);
      throw mapS3Error(e, '', this.bucket);
    }
  }

  private owns(r: S3LifecycleRule): boolean {
    return r.ID?.startsWith(this.namespace) === true;
  }

  private toS3Rule(r: LifecycleRule): S3LifecycleRule {
    return {
      ID: this.namespace + r.id,
      Status: 'Enabled',
      Filter: { Prefix: this.prefix + r.prefix },
      ...(r.transitions?.length ? { Transitions: r.transitions.map((t) => ({ Days: t.days, StorageClass: t.storageClass })) } : {}),
      ...(r.expirationDays !== undefined ? { Expiration: { Days: r.expirationDays } } : {}),
      ...(r.abortIncompleteMultipartUploadDays !== undefined
        ? { AbortIncompleteMultipartUpload: { DaysAfterInitiation: r.abortIncompleteMultipartUploadDays } }
        : {}),
    };
  }

  private fromS3Rule(r: S3LifecycleRule): LifecycleRule {
    const fullPrefix = r.Filter?.Prefix ?? r.Prefix ?? '';
    const rule: LifecycleRule = {
      id: (r.ID ?? '').slice(this.namespace.length),
      prefix: fullPrefix.startsWith(this.prefix) ? fullPrefix.slice(this.prefix.length) : fullPrefix,
    };
    const transitions = (r.Transitions ?? [])
      .filter((t) => t.Days !== undefined && (t.StorageClass === 'STANDARD_IA' || t.StorageClass === 'GLACIER'))
      .map((t) => ({ days: t.Days as number, storageClass: t.StorageClass as 'STANDARD_IA' | 'GLACIER' }));
    if (transitions.length) rule.transitions = transitions;
    if (r.Expiration?.Days !== undefined) rule.expirationDays = r.Expiration.Days;
    if (r.AbortIncompleteMultipartUpload?.DaysAfterInitiation !== undefined) {
      rule.abortIncompleteMultipartUploadDays = r.AbortIncompleteMultipartUpload.DaysAfterInitiation;
    }
    return rule;
  }
}

function validateRule(r: LifecycleRule): void {
  if (typeof r.id !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(r.id))
    throw new InvalidInput(`invalid lifecycle rule id ${JSON.stringify(r.id)}`);
  if (typeof r.prefix !== 'string') throw new InvalidInput(`lifecycle rule ${r.id} needs a prefix ('' for everything)`);
  validateListPrefix(r.prefix);
  const days = (v: number | undefined, what: string) => {
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0))
      throw new InvalidInput(`lifecycle rule ${r.id}: ${what} must be a whole number of days`);
  };
  for (const t of r.transitions ?? []) {
    days(t.days, 'transition days');
    if (t.storageClass !== 'STANDARD_IA' && t.storageClass !== 'GLACIER') {
      throw new InvalidInput(`lifecycle rule ${r.id}: cannot transition to ${JSON.stringify(t.storageClass)}`);
    }
  }
  days(r.expirationDays, 'expiration');
  days(r.abortIncompleteMultipartUploadDays, 'abortIncompleteMultipartUploadDays');
  if (!r.transitions?.length && r.expirationDays === undefined && r.abortIncompleteMultipartUploadDays === undefined) {
    throw new InvalidInput(`lifecycle rule ${r.id} has no action`);
  }
}
