import type { Command } from 'commander';

/** alp telemetry … (the telemetry issue fills this in) */
export function registerTelemetryCommands(_program: Command): void {}
