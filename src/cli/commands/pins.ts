import type { Command } from 'commander';
import { UsageError } from '../../core/errors.ts';
import { addPin, listPins, type Pin, type PinEvent, pinHistory, removePin } from '../../retention/pins.ts';
import { requireHuman } from '../../runtime/human-rules.ts';
import { actingPrincipal, output, type Runtime, withRuntime } from '../runtime.ts';

async function human(rt: Runtime, what: string) {
  return requireHuman(await actingPrincipal(rt), what);
}

function reasonOf(o: { reason?: unknown }, what: string): string {
  if (typeof o.reason !== 'string') throw new UsageError(`${what} needs --reason TEXT`);
  return o.reason;
}

const pinLine = (p: Pin) => `${p.digest}  pinned by ${p.added_by.id} at ${p.added_at}: ${p.reason}`;
const eventLine = (e: PinEvent) =>
  `${e.at}  ${e.action.padEnd(7)}  ${e.digest}  by ${e.by.id}: ${e.reason}${e.pin ? `  (pinned by ${e.pin.added_by.id} at ${e.pin.added_at}: ${e.pin.reason})` : ''}`;

/**
 * Streams `rows` to stdout: one JSON document `{"<name>":[…],"count":n}` written row by row with
 * --json, else one line per row (pins may be many; nothing is collected first).
 */
async function stream<T>(rt: Runtime, name: string, rows: AsyncIterable<T>, line: (row: T) => string, empty: string): Promise<void> {
  const json = rt.opts.json === true;
  let n = 0;
  if (json) process.stdout.write(`{"${name}":[`);
  for await (const row of rows) {
    process.stdout.write(json ? `${n === 0 ? '\n' : ',\n'}  ${JSON.stringify(row)}` : `${line(row)}\n`);
    n++;
  }
  if (json) process.stdout.write(`${n ? '\n' : ''}],"count":${n}}\n`);
  else if (n === 0) process.stdout.write(`${empty}\n`);
}

/**
 * `alp pins add|remove|list|history`: the installation's own SHA-256 pins (retention/pins.ts). Every
 * retention run and every purge recovery keeps the objects they name. Only humans change them; every
 * change is recorded with who, when and --reason.
 */
export function registerPinCommands(program: Command): void {
  const pins = program.command('pins').description('persistent SHA-256 pins: objects retention always keeps');
  pins
    .command('add <digest>')
    .description('pin a digest (a human operator; recorded with who, when and --reason)')
    .option('--reason <text>', 'why it is kept (required)')
    .action(async (digest: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const reason = reasonOf(o, 'pins add');
        const pin = await addPin(rt.ctx, digest, await human(rt, 'pinning a digest'), reason);
        output(rt.opts, pin, () => pinLine(pin));
      }),
    );
  pins
    .command('remove <digest>')
    .description('remove a pin (a human operator; recorded with who, when and --reason): retention treats the object normally again')
    .option('--reason <text>', 'why it is no longer kept (required)')
    .action(async (digest: string, o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const reason = reasonOf(o, 'pins remove');
        const e = await removePin(rt.ctx, digest, await human(rt, 'removing a pin'), reason);
        output(rt.opts, e, () => `${e.digest} unpinned by ${e.by.id} at ${e.at}: ${e.reason}`);
      }),
    );
  pins
    .command('list')
    .description('the stored pins, in digest order')
    .action(async (_o, cmd: Command) => withRuntime(cmd, async (rt) => stream(rt, 'pins', listPins(rt.ctx.items), pinLine, 'no pins')));
  pins
    .command('history')
    .description('every pin add and remove, oldest first: who, when, why')
    .option('--digest <digest>', 'only the changes of this digest')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) =>
        stream(rt, 'history', pinHistory(rt.ctx.items, o.digest ? { digest: String(o.digest) } : {}), eventLine, 'no pin changes'),
      ),
    );
}
