/**
 * Signed attestations verified by someone else's code (issue 20 item 3, "Must show"): `alp start` in
 * its own process serves the envelopes; test/audit/dsse/verify_dsse.py — Debian's python3-cryptography
 * (Ed25519) and the Python standard library, following the DSSE v1 protocol and sharing nothing with
 * ALP — recomputes the pre-authentication encoding and verifies every signature with the public key
 * from `GET /v1/keys`, then the test reads the statements Python decoded (subjects, predicates).
 * Negative controls: a changed payload byte, a changed payloadType, a signature moved to another
 * envelope and another installation's key are all refused by Python.
 *
 * The CLI (`alp keys show`, `alp artifact attest --out`, `alp provenance show --format dsse`) on the
 * same data directory gives the same key and byte-identical envelopes (Ed25519 is deterministic).
 *
 * python3 and python3-cryptography must be installed (CI's .ci/run installs them): without them these
 * tests fail, they do not skip.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type AlpProcessHandle, startAlpProcess } from '../../helpers/alp-process.ts';
import { runAlp } from '../../helpers/cli.ts';
import { tempDir } from '../../helpers/tmp.ts';

const VERIFIER = path.join(import.meta.dirname, 'verify_dsse.py');
// Debian's interpreter, where python3-cryptography installs (a pyenv or venv python3 earlier on PATH may lack it, or carry its own copy).
const PYTHON = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const INSTALL = 'apt-get install -y python3-cryptography (.ci/run installs it)';
const IN_TOTO = 'application/vnd.in-toto+json';

interface Envelope {
  payload: string;
  payloadType: string;
  signatures: Array<{ keyid: string; sig: string }>;
}
interface PublicKey {
  name: string;
  verifier_key: string;
  public_key: string;
  fingerprint: string;
}
// biome-ignore lint/suspicious/noExplicitAny: statements are asserted field by field
type Statement = any;
type Verdict = { ok: true; statement: Statement } | { ok: false; error: string };

/** Runs the Python verifier; fails (never skips) when python3 or its cryptography package is missing. */
function pythonVerify(key: PublicKey, envelopes: Envelope[]): Verdict[] {
  const probe = spawnSync(PYTHON, ['-c', 'import cryptography.hazmat.primitives.asymmetric.ed25519'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error(`${PYTHON} with the cryptography package is missing (${probe.error?.message ?? probe.stderr.trim()}): ${INSTALL}`);
  const r = spawnSync(PYTHON, [VERIFIER], {
    input: JSON.stringify({ public_key: key.public_key, fingerprint: key.fingerprint, envelopes }),
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`verify_dsse.py failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout) as Verdict[];
}

function statementOf(v: Verdict | undefined): Statement {
  assert.ok(v?.ok, `Python refused an envelope ALP signed: ${JSON.stringify(v)}`);
  return v.statement;
}

const hex = (digest: string) => digest.replace(/^sha256:/, '');

describe('DSSE attestations verified by Python (python3-cryptography)', () => {
  let alp: AlpProcessHandle;
  let data: string;
  let human: string;
  let agent: string;
  const call = async (method: string, route: string, opts: { token?: string; json?: unknown; body?: string } = {}) => {
    const res = await fetch(`${alp.url}${route}`, {
      method,
      headers: {
        ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        ...(opts.json !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(opts.json !== undefined ? { body: JSON.stringify(opts.json) } : opts.body !== undefined ? { body: opts.body } : {}),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined, text };
  };
  const ok = async (status: number, method: string, route: string, opts: Parameters<typeof call>[2] = {}) => {
    const r = await call(method, route, opts);
    assert.equal(r.status, status, `${method} ${route}: ${r.text.slice(0, 400)}`);
    return r.json;
  };

  before(async () => {
    data = path.join(tempDir('alp-dsse'), 'data');
    alp = await startAlpProcess({ args: ['--data', data] });
    const token = (kind: string) => alp.status.tokens.find((t) => t.kind === kind)?.token as string;
    [human, agent] = [token('human'), token('agent')];
  });
  after(async () => {
    await alp?.stop();
  });

  it('verifies the decision and provenance envelopes with the key from GET /v1/keys, and refuses altered ones', async () => {
    const { keys } = await ok(200, 'GET', '/v1/keys'); // public: no token
    const key = keys[0] as PublicKey;
    assert.equal(keys.length, 1);
    assert.equal(key.name, `alp.local/${alp.status.installation_id}`);
    assert.ok(key.verifier_key.startsWith(`${key.name}+`));
    // The key was made by `alp start`, private to its owner.
    const keyFile = path.join(data, 'keys', 'installation.ed25519.pem');
    assert.equal(fs.statSync(keyFile).mode & 0o777, 0o600);
    assert.equal(fs.statSync(path.dirname(keyFile)).mode & 0o777, 0o700);

    // deploy: v1 approved by a human after a provenance step produced it; v2 rejected; v3 never built by a step.
    const v1 = await ok(201, 'POST', '/v1/artifacts?name=deploy&filename=deploy.sh&kind=script&label=team=ops', {
      token: agent,
      body: 'echo 1\n',
    });
    const id = v1.artifact_id as string;
    const prompt = `sha256:${'ab'.repeat(32)}`;
    await ok(201, 'POST', `/v1/artifacts/${id}/provenance`, {
      token: agent,
      json: { action: 'generate', model: 'model-x', inputs: [prompt], outputs: [v1.content_hash] },
    });
    await ok(201, 'POST', `/v1/artifacts/${id}/provenance`, { token: agent, json: { action: 'lint', inputs: [v1.content_hash] } });
    await ok(200, 'POST', `/v1/artifacts/${id}/versions/1/transitions`, { token: agent, json: { to: 'PROPOSED' } });
    const approval = await ok(201, 'POST', `/v1/artifacts/${id}/versions/1/approvals`, {
      token: human,
      json: { decision: 'APPROVE', evidence_ref: 'CR-7', expires_in: '2d', comment: 'looks right' },
    });
    assert.equal(approval.version.state, 'APPROVED');
    const v2 = await ok(201, 'POST', `/v1/artifacts/${id}/versions?filename=deploy.sh`, { token: agent, body: 'echo 2\n' });
    await ok(200, 'POST', `/v1/artifacts/${id}/versions/2/transitions`, { token: agent, json: { to: 'PROPOSED' } });
    await ok(201, 'POST', `/v1/artifacts/${id}/versions/2/approvals`, { token: human, json: { decision: 'REJECT', evidence_ref: 'CR-8' } });

    const approved = (await ok(200, 'GET', `/v1/artifacts/${id}/versions/1/attestations`, { token: agent })).attestations;
    const rejected = (await ok(200, 'GET', `/v1/artifacts/${id}/versions/2/attestations`, { token: agent })).attestations;
    const provenance = (await ok(200, 'GET', `/v1/artifacts/${id}/provenance?format=dsse`, { token: agent })) as Envelope;
    assert.deepEqual(
      [...approved, ...rejected].map((a: { decision: string; seq: number }) => a.decision),
      ['APPROVE', 'REJECT'],
    );
    const envelopes: Envelope[] = [approved[0].envelope, rejected[0].envelope, provenance];
    for (const e of envelopes) {
      assert.equal(e.payloadType, IN_TOTO);
      assert.deepEqual(
        e.signatures.map((s) => s.keyid),
        [key.fingerprint],
      );
    }

    const [approveVerdict, rejectVerdict, provenanceVerdict] = pythonVerify(key, envelopes);
    const decision = statementOf(approveVerdict);
    assert.equal(decision._type, 'https://in-toto.io/Statement/v1');
    assert.equal(decision.predicateType, 'urn:alp:attestation:decision:v1');
    assert.deepEqual(decision.subject, [
      { name: 'deploy@v1/deploy.sh', digest: { sha256: hex(v1.content_hash) }, annotations: { artifact_id: id, version: 1 } },
    ]);
    const p = decision.predicate;
    assert.equal(p.decision, 'APPROVE');
    assert.equal(p.approver.kind, 'human');
    assert.equal(p.approver.id, approval.approval.actor.id);
    assert.equal(p.evidence_ref, 'CR-7');
    assert.equal(p.comment, 'looks right');
    assert.equal(p.expires_at, approval.approval.expires_at);
    // --expires-in 2d from the decision (the expiry and the entry's timestamp are two reads of the clock).
    assert.ok(Math.abs(Date.parse(p.expires_at) - Date.parse(p.decided_at) - 2 * 86_400_000) < 5_000, `${p.decided_at} -> ${p.expires_at}`);
    assert.equal(p.round, 1);
    assert.equal(p.counted, true);
    assert.equal(p.reviewed_digest, v1.content_hash);
    assert.deepEqual(p.policy, {
      quorum: 1,
      kind: 'script',
      labels: { team: 'ops' },
      approval_lifetime_default_ms: 7 * 86_400_000,
      approval_lifetime_max_ms: 365 * 86_400_000,
      // Issue 20 item 4: the installation approval policy recorded on the entry at decision time (never set here: version 0, the defaults).
      effective_quorum: 1,
      installation_policy: {
        version: 0,
        hash: p.policy.installation_policy.hash,
        quorum: 1,
        self_approval: 'not-counted',
        max_approval_lifetime_ms: 365 * 86_400_000,
        evidence_patterns: [],
      },
    });
    assert.match(p.policy.installation_policy.hash, /^sha256:[0-9a-f]{64}$/);
    assert.deepEqual(p.audit_entry, { artifact_id: id, seq: approval.approval.seq, hash: approval.approval.hash });
    assert.equal(p.installation, `urn:alp:installation:${alp.status.installation_id}`);

    const rejection = statementOf(rejectVerdict);
    assert.equal(rejection.predicate.decision, 'REJECT');
    assert.equal(rejection.predicate.evidence_ref, 'CR-8');
    assert.deepEqual(rejection.subject[0].digest, { sha256: hex(v2.content_hash) });

    // SLSA provenance: the subjects are what the steps produced (v1 only: not v2, not the inputs).
    const slsa = statementOf(provenanceVerdict);
    assert.equal(slsa.predicateType, 'https://slsa.dev/provenance/v1');
    assert.deepEqual(slsa.subject, [
      { name: 'deploy@v1/deploy.sh', digest: { sha256: hex(v1.content_hash) }, annotations: { artifact_id: id, version: 1, steps: [1] } },
    ]);
    assert.equal(slsa.predicate.buildDefinition.buildType, 'urn:alp:provenance:steps:v1');
    assert.equal(slsa.predicate.runDetails.builder.id, `urn:alp:installation:${alp.status.installation_id}`);
    assert.deepEqual(
      slsa.predicate.buildDefinition.resolvedDependencies.map((d: { digest: { sha256: string } }) => d.digest.sha256),
      [hex(prompt), hex(v1.content_hash)],
    );
    assert.deepEqual(
      slsa.predicate.buildDefinition.internalParameters.steps.map((s: { action: string }) => s.action),
      ['generate', 'lint'],
    );

    // Negative controls, each refused by Python.
    const decoded = Buffer.from(provenance.payload, 'base64');
    const flipped = Buffer.from(decoded);
    const at = flipped.indexOf('deploy@v1');
    flipped.writeUInt8((flipped[at] as number) ^ 0x01, at); // one payload byte: "deploy" -> "eeploy"
    const otherKey = path.join(tempDir('alp-dsse-other'), 'other');
    const other = await runAlp(['init', '--data', otherKey, '--json']);
    assert.equal(other.code, 0, other.stderr);
    const foreign = (JSON.parse(other.stdout) as { signing_key: PublicKey }).signing_key;
    const altered: Envelope[] = [
      { ...provenance, payload: flipped.toString('base64') },
      { ...provenance, payloadType: 'application/json' },
      { ...provenance, payloadType: `${IN_TOTO} ` },
      { ...approved[0].envelope, signatures: rejected[0].envelope.signatures },
    ];
    assert.deepEqual(
      pythonVerify(key, altered).map((v) => v.ok),
      [false, false, false, false],
    );
    // The intact envelopes under another installation's key: refused too.
    assert.deepEqual(
      pythonVerify(foreign, envelopes).map((v) => v.ok),
      [false, false, false],
    );
    // The URL-safe alphabet is the same envelope to a DSSE verifier.
    const urlSafe = { ...provenance, payload: provenance.payload.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '') };
    assert.equal(pythonVerify(key, [urlSafe])[0]?.ok, true);

    // An artifact without provenance steps has no SLSA statement, signed or not.
    const bare = await ok(201, 'POST', '/v1/artifacts?name=bare&filename=b.txt', { token: agent, body: 'b\n' });
    const none = await call('GET', `/v1/artifacts/${bare.artifact_id}/provenance?format=dsse`, { token: agent });
    assert.equal(none.status, 404);
    assert.equal(none.json.details.reason, 'NO_PROVENANCE');

    // The CLI on the same data directory: the same key, byte-identical envelopes (deterministic signatures).
    const shown = await runAlp(['keys', 'show', '--data', data, '--json']);
    assert.equal(shown.code, 0, shown.stderr);
    assert.deepEqual(JSON.parse(shown.stdout).keys, keys);
    const out = path.join(tempDir('alp-dsse-out'), 'deploy-v1.intoto.jsonl');
    const attest = await runAlp(['artifact', 'attest', 'deploy', '--version', '1', '--out', out, '--data', data]);
    assert.equal(attest.code, 0, attest.stderr);
    assert.equal(fs.readFileSync(out, 'utf8'), `${JSON.stringify(approved[0].envelope)}\n`);
    const signed = await runAlp(['provenance', 'show', id, '--format', 'dsse', '--data', data]);
    assert.equal(signed.code, 0, signed.stderr);
    assert.deepEqual(JSON.parse(signed.stdout), provenance);
    // Over HTTP, the same command gives the same bundle.
    const remote = await runAlp(['artifact', 'attest', id, '--version', '2', '--server', alp.url, '--token', agent]);
    assert.equal(remote.code, 0, remote.stderr);
    assert.equal(remote.stdout, `${JSON.stringify(rejected[0].envelope)}\n`);
  });
});
