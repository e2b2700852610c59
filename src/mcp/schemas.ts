/**
 * The zod fields the tools' input schemas share. They catch the shape (types, ranges, enums) with a
 * message naming the field; the services still validate every value by their own rules (names,
 * filenames, labels, digests, states), and their INVALID errors come back as tool errors.
 */
import { z } from 'zod';
import { EXECUTION_OUTPUTS } from '../core/object-keys.ts';
import { MCP_MAX_INLINE_BYTES, MCP_MAX_INLINE_CHARS } from './content.ts';

export const artifactId = z.string().min(1).max(64).describe('the artifact id (from create_artifact or list_artifacts)');
/** A version: its number, or `@` and one of the artifact's aliases (resolved by lifecycle/aliases.ts). */
export const versionNumber = z
  .union([z.number().int().min(1), z.string().regex(/^@/).max(65)])
  .describe('the version number (1, 2, …), or an alias of the artifact (@prod)');
export const runId = z.string().min(1).max(64).describe('the run id (from start_execution)');
export const digest = z
  .string()
  .max(80)
  .describe('expected sha256 digest, `sha256:` + 64 hex digits: nothing is stored if the bytes differ');
export const limit = z.number().int().min(1).max(1000).describe('page size (default 50)');
export const cursor = z.string().max(4096).describe('the cursor of the previous page');

/** Inline content (and, over stdio only, a file path): exactly one of them. */
export function contentFields(allowFilePaths: boolean) {
  const fields = {
    content: z
      .string()
      .max(MCP_MAX_INLINE_CHARS)
      .optional()
      .describe(`the content inline, at most ${MCP_MAX_INLINE_BYTES} bytes once decoded`),
    encoding: z.enum(['utf8', 'base64']).optional().describe('how `content` is encoded (default utf8)'),
    path: z
      .string()
      .min(1)
      .max(4096)
      .optional()
      .describe('a file on your machine to store instead of inline content (any size; absolute, or relative to where alp mcp runs)'),
    digest: digest.optional(),
  };
  if (allowFilePaths) return fields;
  const { path: _path, ...inline } = fields;
  // Over HTTP the server cannot read the agent's files: the field is not offered.
  return inline as typeof fields;
}

export const outputName = z.enum(EXECUTION_OUTPUTS).describe('which output of the run: stdout.log, stderr.log or output.json');
