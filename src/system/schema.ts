/**
 * Schema versions: the layout version this code writes, and the check every opening of an
 * installation runs (`src/runtime/open.ts`). A stored version newer than this code refuses with
 * `SchemaTooNew` (an older ALP must not write into a layout it does not know); an older one runs the
 * registered migrations (`./migrations.ts`) in order and records each step, conditioned on the
 * version it started from, so racing nodes and a crash half-way are safe. A fresh store (no
 * installation record, no queue state yet) passes: it is created at the current version.
 *
 * Two components are versioned: the installation record `SYS#installation / INSTALLATION`
 * (`schema_version`) and the telemetry queue's state item `TELQ#outbox / STATE` (`schema`). A
 * record written before the field existed counts as version 1.
 */
import { AlpError, ConditionFailed } from '../core/errors.ts';
import { INSTALLATION_SK, SYS_PK, TELQ_PK, TELQ_STATE_SK } from '../core/keys.ts';
import { cond, type ItemKey, type ItemStore } from '../store/item-store.ts';
import { MIGRATIONS, type Migration, type SchemaComponent } from './migrations.ts';

/** The layout versions this code reads and writes. */
/**
 * installation 2: execution output/finish records keyed outside `EXEC#`; 3: every artifact has its
 * search entry (migrations.ts).
 */
export const CURRENT_SCHEMA: Readonly<Record<SchemaComponent, number>> = { installation: 3, telemetry_queue: 1 };

const COMPONENTS: Record<SchemaComponent, { key: ItemKey; attr: string; what: string }> = {
  installation: { key: { PK: SYS_PK, SK: INSTALLATION_SK }, attr: 'schema_version', what: "the installation's schema" },
  telemetry_queue: { key: { PK: TELQ_PK, SK: TELQ_STATE_SK }, attr: 'schema', what: "the telemetry queue's schema" },
};

/** A verdict of the schema check (as opposed to a failure to read the versions). */
export abstract class SchemaError extends AlpError {}

/** The installation was written by a newer ALP: this code refuses to open it (exit 4, HTTP 409). */
export class SchemaTooNew extends SchemaError {
  constructor(component: SchemaComponent, stored: number, supported: number) {
    super(
      'CONFLICT',
      `${COMPONENTS[component].what} is version ${stored}, newer than this ALP supports (${supported}): upgrade ALP to open this installation`,
      { reason: 'schema_too_new', component, stored, supported },
    );
  }
}

/** An older layout with no registered migration to the current one: a defect of this build. */
export class NoMigration extends SchemaError {
  constructor(component: SchemaComponent, from: number, supported: number) {
    super(
      'INTERNAL',
      `${COMPONENTS[component].what} is version ${from}; no migration to version ${from + 1} is registered (this ALP writes ${supported})`,
      {
        reason: 'no_migration',
        component,
        from,
        supported,
      },
    );
  }
}

export interface SchemaStatus {
  component: SchemaComponent;
  /** The version found, or undefined when the item does not exist yet (a fresh store). */
  stored: number | undefined;
  current: number;
  /** Migrations this check ran (ids), in order. */
  migrated: string[];
  /** With `unreadable: 'skip'`: the version could not be read, nothing was checked. */
  unreadable?: true;
}

export interface SchemaOptions {
  /** The registered migrations; tests inject their own. */
  migrations?: readonly Migration[];
  /** The versions this code writes; tests pretend to be a newer build. */
  current?: Readonly<Record<SchemaComponent, number>>;
  /**
   * `skip`: a store whose versions cannot be read at all (a DynamoDB table not created yet) passes as
   * unchecked (`SchemaStatus.unreadable`); the startup sequence checks again once it is prepared.
   * Default `throw`. Migration and record failures always throw.
   */
  unreadable?: 'throw' | 'skip';
}

/** The stored version of one component, or undefined when its item does not exist yet. */
export async function readSchemaVersion(items: ItemStore, component: SchemaComponent): Promise<number | undefined> {
  const { key, attr } = COMPONENTS[component];
  const item = await items.get(key, { consistent: true });
  if (!item) return undefined;
  const v = item[attr];
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : 1;
}

/**
 * Checks every versioned component: refuses a newer one, migrates an older one step by step. Called
 * on every opening of an installation, before any service runs.
 */
export async function checkSchema(items: ItemStore, opts: SchemaOptions = {}): Promise<SchemaStatus[]> {
  const current = opts.current ?? CURRENT_SCHEMA;
  const migrations = opts.migrations ?? MIGRATIONS;
  const out: SchemaStatus[] = [];
  for (const component of Object.keys(COMPONENTS) as SchemaComponent[]) {
    out.push(await checkComponent(items, component, current[component], migrations, opts.unreadable ?? 'throw'));
  }
  return out;
}

async function checkComponent(
  items: ItemStore,
  component: SchemaComponent,
  current: number,
  migrations: readonly Migration[],
  unreadable: 'throw' | 'skip',
): Promise<SchemaStatus> {
  let stored: number | undefined;
  try {
    stored = await readSchemaVersion(items, component);
  } catch (e) {
    if (unreadable === 'throw') throw e;
    return { component, stored: undefined, current, migrated: [], unreadable: true };
  }
  const status: SchemaStatus = { component, stored, current, migrated: [] };
  if (stored === undefined) return status;
  if (stored > current) throw new SchemaTooNew(component, stored, current);
  let at = stored;
  while (at < current) {
    const step = migrations.find((m) => m.component === component && m.from === at);
    if (!step) throw new NoMigration(component, at, current);
    await step.run(items);
    at = await recordStep(items, component, at);
    status.migrated.push(step.id);
  }
  return status;
}

/**
 * Records `from + 1` if the stored version is still `from`. A racing node that recorded it first
 * makes the condition fail: the version read back is then the one to continue from.
 */
async function recordStep(items: ItemStore, component: SchemaComponent, from: number): Promise<number> {
  const { key, attr } = COMPONENTS[component];
  const fromCondition = from === 1 ? cond.or(cond.eq(attr, 1), cond.attrNotExists(attr)) : cond.eq(attr, from);
  try {
    await items.update(key, { set: { [attr]: from + 1 } }, { condition: cond.and(cond.exists(), fromCondition) });
    return from + 1;
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const now = await readSchemaVersion(items, component);
    if (now === undefined || now <= from) throw e;
    return now;
  }
}
