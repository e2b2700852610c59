/**
 * ALP's DynamoDB table: key PK/SK (strings), GSI1 on GSI1PK/GSI1SK with projection ALL, on-demand
 * billing. `alp init` creates it from tableDefinition or refuses an existing table that schemaProblems
 * finds different (nothing is changed).
 */
import type { AttributeDefinition, KeySchemaElement, TableDescription } from '@aws-sdk/client-dynamodb';

export const GSI1 = 'GSI1';

const KEY_ATTRIBUTES: AttributeDefinition[] = ['PK', 'SK', 'GSI1PK', 'GSI1SK'].map((AttributeName) => ({
  AttributeName,
  AttributeType: 'S',
}));

export function tableDefinition(table: string) {
  return {
    TableName: table,
    BillingMode: 'PAY_PER_REQUEST' as const,
    AttributeDefinitions: KEY_ATTRIBUTES,
    KeySchema: [
      { AttributeName: 'PK', KeyType: 'HASH' as const },
      { AttributeName: 'SK', KeyType: 'RANGE' as const },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: GSI1,
        KeySchema: [
          { AttributeName: 'GSI1PK', KeyType: 'HASH' as const },
          { AttributeName: 'GSI1SK', KeyType: 'RANGE' as const },
        ],
        Projection: { ProjectionType: 'ALL' as const },
      },
    ],
  };
}

function sameKeys(actual: KeySchemaElement[] | undefined, hash: string, range: string): boolean {
  const a = actual ?? [];
  return (
    a.length === 2 &&
    a.some((k) => k.AttributeName === hash && k.KeyType === 'HASH') &&
    a.some((k) => k.AttributeName === range && k.KeyType === 'RANGE')
  );
}

function describeKeys(keys: KeySchemaElement[] | undefined): string {
  return (keys ?? []).map((k) => `${k.AttributeName} ${k.KeyType}`).join(', ') || 'none';
}

/** Every way the table differs from ALP's schema; empty when it matches. */
export function schemaProblems(t: TableDescription): string[] {
  const problems: string[] = [];
  if (!sameKeys(t.KeySchema, 'PK', 'SK')) problems.push(`key schema is (${describeKeys(t.KeySchema)}), expected (PK HASH, SK RANGE)`);
  const gsi = (t.GlobalSecondaryIndexes ?? []).find((g) => g.IndexName === GSI1);
  if (!gsi) problems.push('global secondary index GSI1 is missing');
  else {
    if (!sameKeys(gsi.KeySchema, 'GSI1PK', 'GSI1SK'))
      problems.push(`GSI1 key schema is (${describeKeys(gsi.KeySchema)}), expected (GSI1PK HASH, GSI1SK RANGE)`);
    if (gsi.Projection?.ProjectionType !== 'ALL')
      problems.push(`GSI1 projects ${gsi.Projection?.ProjectionType ?? 'nothing'}, expected ALL`);
  }
  for (const def of t.AttributeDefinitions ?? []) {
    if (['PK', 'SK', 'GSI1PK', 'GSI1SK'].includes(def.AttributeName ?? '') && def.AttributeType !== 'S') {
      problems.push(`attribute ${def.AttributeName} has type ${def.AttributeType}, expected S (string)`);
    }
  }
  return problems;
}

export function isActive(t: TableDescription): boolean {
  if (t.TableStatus !== 'ACTIVE') return false;
  return (t.GlobalSecondaryIndexes ?? []).every((g) => g.IndexStatus === undefined || g.IndexStatus === 'ACTIVE');
}
