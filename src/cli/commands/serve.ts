import type { Command } from 'commander';

/** alp serve (the HTTP issue fills this in) */
export function registerServeCommands(_program: Command): void {}
