import type { Command } from 'commander';

/** alp epoch / backup / restore / reconcile (the recovery issue fills this in) */
export function registerRecoveryCommands(_program: Command): void {}
