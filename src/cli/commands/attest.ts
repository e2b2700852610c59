/**
 * alp keys show|history, alp artifact attest (issue 20 items 2–3): the installation's public keys
 * and key log, and the signed decision attestations of a version — locally or over HTTP (GET /v1/keys,
 * GET …/versions/{v}/attestations), through the Backend like every artifact command. `alp keys
 * rotate` (operator only, where the storage is) replaces the embedded key (audit/key-rotation.ts).
 */
import type { Command } from 'commander';
import { rotateInstallationKey } from '../../audit/key-rotation.ts';
import type { Backend } from '../backend.ts';
import { writeNewUserFile } from '../files.ts';
import { actingPrincipal, output, withRuntime } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { chooseVersion, noteChosen, outputChosen, resolveArtifactRef } from '../targets.ts';

type KeyList = Awaited<ReturnType<Backend['keys']>>;

function keyLines(k: KeyList['keys'][number]): string[] {
  const when = [k.activated_at ? `since ${k.activated_at}` : 'not recorded', ...(k.retired_at ? [`retired ${k.retired_at}`] : [])];
  const how = k.recorded_by
    ? `, entry ${k.recorded_by.seq} ${k.recorded_by.action}${k.recorded_by.cross_signed ? ' (cross-signed)' : ''}`
    : '';
  return [
    `${k.status.padEnd(13)} ${k.fingerprint}   (${when.join(', ')}${how})`,
    `name:         ${k.name}`,
    `verifier key: ${k.verifier_key}`,
    `public key:   ${k.public_key}   (${k.algorithm}, raw 32 bytes, base64)`,
    `fingerprint:  ${k.fingerprint}`,
  ];
}

function historyLines(h: KeyList['history'][number]): string[] {
  const from = h.previous_fingerprint ? ` from ${h.previous_fingerprint}` : '';
  return [
    `#${h.seq} ${h.timestamp} ${h.action} ${h.fingerprint}${from}`,
    `  by ${h.by.id} (${h.by.kind})${h.reason ? `: ${h.reason}` : ''}`,
    `  cross-signed by the previous key: ${h.cross_signed ? 'yes' : 'no'}; hash ${h.hash}`,
  ];
}

export function registerAttestationCommands(program: Command, artifact: Command): void {
  const keys = program.command('keys').description('the installation’s signing key');
  keys
    .command('show')
    .description(
      'the public keys: the current one, then the retired ones (verifier key for signed notes, raw Ed25519 key for DSSE envelopes, sha256 fingerprint = keyid); --json adds the key log',
    )
    .action(async (_o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const list = await b.keys();
        output(opts, list, () => list.keys.flatMap((k, i) => [...(i ? [''] : []), ...keyLines(k)]));
      }),
    );
  keys
    .command('history')
    .description('the key log: every activation and rotation, with its statement and signatures (verified by `alp audit verify`)')
    .action(async (_o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const { history } = await b.keys();
        output(opts, { history }, () => history.flatMap(historyLines));
      }),
    );
  keys
    .command('rotate')
    .description(
      'replace the embedded installation key with a new one, recorded in the key log and cross-signed by the old key (operator only, where the storage is; a key named by ALP_SIGNING_KEY or supplied by the host is rotated at its source)',
    )
    .option('--reason <text>', 'why (recorded in the key log)')
    .action(async (o, cmd: Command) =>
      withRuntime(cmd, async (rt) => {
        const by = await actingPrincipal(rt);
        const r = await rotateInstallationKey(rt.ctx, { by: { id: by.id, kind: by.kind }, reason: o.reason });
        output(rt.opts, r, () => [
          `rotated the installation key: ${r.previous_fingerprint} -> ${r.fingerprint} (key log entry ${r.entry.seq}, cross-signed)`,
          'the old private key is deleted; its public key stays in `alp keys show` and the key log',
        ]);
      }),
    );

  artifact
    .command('attest <id>')
    .description(
      'every approval and rejection of a version as a signed in-toto statement (DSSE envelopes, one JSON line each; verify with `alp keys show`)',
    )
    .option('--version <n>', 'version or @alias (default: the latest)')
    .option('--out <file>', 'write the envelopes to this new file (in-toto JSON Lines bundle) instead of stdout')
    .action(async (ref: string, o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const id = await resolveArtifactRef(b, ref);
        const choice = await chooseVersion(b, id, o.version, 'latest');
        const list = await b.attestations(id, choice.version);
        const bundle = list.attestations.map((a) => `${JSON.stringify(a.envelope)}\n`).join('');
        if (!o.out) {
          if (opts.json) return outputChosen(opts, id, choice, list, () => []);
          noteChosen(opts, id, choice);
          process.stdout.write(bundle);
          return;
        }
        await writeNewUserFile(o.out, '--out', bundle);
        outputChosen(
          opts,
          id,
          choice,
          { out: o.out, artifact_id: id, version: choice.version, envelopes: list.attestations.length },
          () => `wrote ${list.attestations.length} signed decision(s) of ${id} v${choice.version} to ${o.out}`,
        );
      }),
    );
}
