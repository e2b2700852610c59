/** Request validation with TypeBox: the validator compiler and the shared schemas. */
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import type { FastifyInstance } from 'fastify';
import { SHARED_SCHEMAS } from './schemas.ts';

/** Bodies are checked as they are; path parameters, queries and headers are converted first. */
export function typeboxValidator(schema: TSchema, httpPart: string) {
  const check = TypeCompiler.Compile(schema);
  const part = httpPart === 'querystring' ? 'query' : httpPart;
  return (data: unknown) => {
    const value = httpPart === 'body' ? data : Value.Convert(schema, data);
    if (check.Check(value)) return httpPart === 'headers' ? true : { value };
    const first = check.Errors(value).First();
    const where = first?.path ? `${part}${first.path.replace(/\//g, '.')}` : part;
    const error = Object.assign(new Error(`${where}: ${first?.message ?? 'invalid'}`), { statusCode: 400 });
    return { error };
  };
}

export function registerValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => typeboxValidator(schema as TSchema, httpPart ?? 'body'));
  for (const s of SHARED_SCHEMAS) app.addSchema(s);
}
