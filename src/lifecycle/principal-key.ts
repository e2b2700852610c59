/**
 * The one normalisation of principal ids: Unicode NFKC, then case folding (toLowerCase after NFKC;
 * for the ASCII alphabet principal ids are limited to, this is exact case folding). Two ids with the
 * same key are the same principal: token creation refuses a second spelling and quorum counting
 * counts one approver per key (so data written before the rule, with both spellings, counts once).
 */
export function principalKey(id: string): string {
  return id.normalize('NFKC').toLowerCase();
}
