import type { Command } from 'commander';

/** alp lifecycle apply|status (the distributed-profile issue fills this in) */
export function registerStorageRuleCommands(_program: Command): void {}
