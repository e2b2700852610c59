/**
 * Registered pull exporters of the telemetry outbox (docs/design.md "Webhooks", "Exporters sharing the
 * outbox"). An exporter that runs where the storage is and sends records somewhere only it can reach
 * (`alp telemetry drain`: stdout, a loopback collector) registers here before its first claim. While one
 * is registered, the webhook dispatcher of `alp serve` claims nothing: the outbox is consumed by the
 * pull exporter, which also settles each record's webhook deliveries before acknowledging it, so both
 * get every record. `alp telemetry exporters remove NAME` hands the outbox back to the dispatcher.
 *
 * Items: `TELX#exporters / {name}` (type `telemetry_exporter`), strongly consistent reads (a handful).
 */
import { ConditionFailed, Conflict, InvalidInput } from '../core/errors.ts';
import { cond, type ItemStore, queryAll } from '../store/item-store.ts';

export const EXPORTERS_PK = 'TELX#exporters';
const NAME_RE = /^[a-z][a-z0-9_.-]{0,63}$/;

export interface RegisteredExporter {
  name: string;
  registered_at: string;
}

function validName(name: string): string {
  if (!NAME_RE.test(name)) throw new InvalidInput(`exporter name must match ${NAME_RE.source}`);
  return name;
}

/**
 * Registers `name` (idempotent); true when this call registered it. One pull exporter at a time: two
 * would each acknowledge records the other never saw, so another name is refused (CONFLICT,
 * `details.reason: EXPORTER_REGISTERED`) — remove it first.
 */
export async function registerExporter(items: ItemStore, name: string, at: Date): Promise<boolean> {
  const sk = validName(name);
  const other = (await registeredExporters(items)).find((e) => e.name !== sk);
  if (other)
    throw new Conflict(
      `the pull exporter ${JSON.stringify(other.name)} is registered: one at a time (alp telemetry exporters remove ${other.name})`,
      { reason: 'EXPORTER_REGISTERED', registered: other.name },
    );
  try {
    await items.put(
      { PK: EXPORTERS_PK, SK: sk, type: 'telemetry_exporter', name, registered_at: at.toISOString() },
      { condition: cond.notExists() },
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionFailed) return false;
    throw e;
  }
}

/** Removes `name`; false when it was not registered. */
export async function removeExporter(items: ItemStore, name: string): Promise<boolean> {
  try {
    await items.delete({ PK: EXPORTERS_PK, SK: validName(name) }, { condition: cond.exists() });
    return true;
  } catch (e) {
    if (e instanceof ConditionFailed) return false;
    throw e;
  }
}

export async function registeredExporters(items: ItemStore): Promise<RegisteredExporter[]> {
  return (await queryAll(items, { pk: EXPORTERS_PK, consistent: true })).map((i) => ({
    name: i.name as string,
    registered_at: i.registered_at as string,
  }));
}
