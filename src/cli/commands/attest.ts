/**
 * alp keys show, alp artifact attest (issue 20 items 2–3): the installation's public key, and the
 * signed decision attestations of a version — locally or over HTTP (GET /v1/keys,
 * GET …/versions/{v}/attestations), through the Backend like every artifact command.
 */
import type { Command } from 'commander';
import { writeNewUserFile } from '../files.ts';
import { output } from '../runtime.ts';
import { withBackend } from '../session.ts';
import { chooseVersion, noteChosen, outputChosen, resolveArtifactRef } from '../targets.ts';

export function registerAttestationCommands(program: Command, artifact: Command): void {
  program
    .command('keys')
    .description('the installation’s signing key')
    .command('show')
    .description('the public key: verifier key (signed notes), raw Ed25519 key (DSSE envelopes) and its sha256 fingerprint')
    .action(async (_o, cmd: Command) =>
      withBackend(cmd, async (b, opts) => {
        const list = await b.keys();
        output(opts, list, () =>
          list.keys.flatMap((k) => [
            `name:         ${k.name}`,
            `verifier key: ${k.verifier_key}`,
            `public key:   ${k.public_key}   (${k.algorithm}, raw 32 bytes, base64)`,
            `fingerprint:  ${k.fingerprint}`,
          ]),
        );
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
