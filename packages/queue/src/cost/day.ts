/** A UTC day, `YYYY-MM-DD`: what a tenant's daily budget and spend are kept by (SPEC §14). */
export function utcDay(now: number): string {
  return new Date(now).toISOString().slice(0, 10);
}
