// A small, fixed order book the snippets query through `dataProxy.request`. Generated from a
// seed so every run (and every test) sees the same figures without shipping a data file.

/** One order of the sample data set. */
export interface Order {
  id: string;
  customer: string;
  region: 'EMEA' | 'AMER' | 'APAC';
  status: 'open' | 'shipped' | 'cancelled';
  /** Order value in cents, so sums stay exact. */
  totalCents: number;
  /** ISO date the order was placed. */
  placedAt: string;
}

const regions = ['EMEA', 'AMER', 'APAC'] as const;
const statuses = ['open', 'shipped', 'shipped', 'cancelled'] as const;
const customers = ['acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark', 'wayne', 'tyrell'];

/** Deterministic 32-bit PRNG (mulberry32): the same data on every machine. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function pick<T>(items: readonly T[], next: () => number): T {
  return items[Math.floor(next() * items.length)]!;
}

function generateOrders(count: number): Order[] {
  const next = random(8);
  const start = Date.UTC(2026, 0, 1);
  return Array.from({ length: count }, (_, index) => ({
    id: `ord-${String(index + 1).padStart(4, '0')}`,
    customer: pick(customers, next),
    region: pick(regions, next),
    status: pick(statuses, next),
    totalCents: 1_000 + Math.floor(next() * 250_000),
    placedAt: new Date(start + Math.floor(next() * 300) * 86_400_000).toISOString().slice(0, 10),
  }));
}

/** The 240 orders every snippet sees. Frozen: a data handler must never hand out mutable state. */
export const sampleOrders: readonly Readonly<Order>[] = Object.freeze(
  generateOrders(240).map((order) => Object.freeze(order)),
);
