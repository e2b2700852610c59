import type { Command } from 'commander';

/** alp retention … (the retention issue fills this in) */
export function registerRetentionCommands(_program: Command): void {}
