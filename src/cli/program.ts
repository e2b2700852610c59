import { Command, Option } from 'commander';
import { registerAdminCommands } from './commands/admin.ts';
import { registerAliasCommands } from './commands/aliases.ts';
import { registerArtifactCommands } from './commands/artifact.ts';
import { registerAttestationCommands } from './commands/attest.ts';
import { registerAuditCommands } from './commands/audit.ts';
import { registerNativeBackupCommands } from './commands/backup-native.ts';
import { registerExecCommands } from './commands/exec.ts';
import { registerLifecycleCommands } from './commands/lifecycle.ts';
import { registerMcpCommand } from './commands/mcp.ts';
import { registerPinCommands } from './commands/pins.ts';
import { registerPolicyCommands } from './commands/policy.ts';
import { registerProfileCommands } from './commands/profile.ts';
import { registerRecoveryCommands } from './commands/recovery.ts';
import { registerRetentionCommands } from './commands/retention.ts';
import { registerServeCommands } from './commands/serve.ts';
import { registerStartCommand } from './commands/start.ts';
import { registerStorageRuleCommands } from './commands/storage-rules.ts';
import { registerTelemetryCommands } from './commands/telemetry.ts';
import { registerWebhookCommands } from './commands/webhooks.ts';

export function buildProgram(): Command {
  const program = new Command('alp')
    .description('ALP — artifact lifecycle store')
    .addOption(new Option('--data <dir>', 'embedded data directory (sqlite + files); env ALP_DATA'))
    .addOption(new Option('--metadata <url>', 'sqlite:PATH | dynamodb://TABLE?region=R&endpoint=URL'))
    .addOption(new Option('--content <url>', 'file:DIR | s3://BUCKET[/PREFIX]?region=R&endpoint=URL'))
    .addOption(new Option('--token <token>', 'act as this token’s principal').env('ALP_TOKEN'))
    .addOption(
      new Option('--server <url>', 'talk HTTP to this `alp serve` (artifact, lifecycle, exec, provenance, history, query commands)').env(
        'ALP_URL',
      ),
    )
    .addOption(new Option('--profile <name>', 'a server and token from the config file (alp profile set)').env('ALP_PROFILE'))
    .option('--json', 'print results as one JSON document')
    .showHelpAfterError(false)
    // "(Did you mean --filename?)" after an unknown option or command; inherited by every subcommand.
    .showSuggestionAfterError(true)
    .exitOverride();
  registerStartCommand(program);
  registerAdminCommands(program);
  const artifact = registerArtifactCommands(program);
  registerLifecycleCommands(program, artifact);
  registerAliasCommands(program);
  registerAttestationCommands(program, artifact);
  registerExecCommands(program);
  registerAuditCommands(program);
  registerServeCommands(program);
  registerMcpCommand(program);
  registerTelemetryCommands(program);
  registerWebhookCommands(program);
  registerPolicyCommands(program);
  registerRecoveryCommands(program);
  registerNativeBackupCommands(program);
  registerStorageRuleCommands(program);
  registerRetentionCommands(program);
  registerPinCommands(program);
  registerProfileCommands(program);
  for (const cmd of allCommands(program)) cmd.exitOverride().configureOutput({ outputError: () => {} });
  return program;
}

function allCommands(cmd: Command): Command[] {
  return [cmd, ...cmd.commands.flatMap(allCommands)];
}
