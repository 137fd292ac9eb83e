// The snippets the demo runs: what an LLM writes when asked a question about the sample data.
// The CLI runs them and the playground offers them as one-click examples, from this one list.
import type { ExecutionLimits } from '@coda/sandbox-core';

/** A snippet with a name, ready to submit. */
export interface Example {
  id: string;
  title: string;
  /** The body of an async function, as the isolate engine expects. */
  code: string;
  /** Limits tighter than the defaults, when the example needs them. */
  limits?: Partial<ExecutionLimits>;
}

/** Four realistic snippets: a query, an aggregation, a run that streams status, and tool calls. */
export const examples: readonly Example[] = [
  {
    id: 'query',
    title: 'Query: five largest open EMEA orders',
    code: `// Which open EMEA orders are worth chasing first?
const { items } = await dataProxy.request({
  resource: 'orders',
  where: { region: 'EMEA', status: 'open' },
  pageSize: 100,
});
return items
  .sort((a, b) => b.totalCents - a.totalCents)
  .slice(0, 5)
  .map((o) => ({ id: o.id, customer: o.customer, total: (o.totalCents / 100).toFixed(2) }));`,
  },
  {
    id: 'aggregation',
    title: 'Aggregation: shipped revenue per region',
    code: `// Shipped revenue per region, reading every page.
const cents = {};
let page = 1;
let pages = 1;
do {
  const res = await dataProxy.request({ resource: 'orders', where: { status: 'shipped' }, page });
  pages = res.pages;
  for (const o of res.items) cents[o.region] = (cents[o.region] ?? 0) + o.totalCents;
  page += 1;
} while (page <= pages);
return Object.entries(cents)
  .map(([region, total]) => ({ region, revenue: total / 100 }))
  .sort((a, b) => b.revenue - a.revenue);`,
  },
  {
    id: 'status-stream',
    title: 'Status stream: open orders per customer',
    code: `// Count open orders per customer, reporting progress as it goes.
reportStatus('Loading customers');
const { items: customers } = await dataProxy.request({ resource: 'customers' });
const summary = [];
for (const [index, customer] of customers.entries()) {
  const { total } = await dataProxy.request({
    resource: 'orders',
    where: { customer, status: 'open' },
    pageSize: 1,
  });
  reportStatus(\`Checked \${customer} (\${index + 1}/\${customers.length})\`);
  summary.push({ customer, openOrders: total });
}
console.log('done:', summary.length, 'customers');
return summary.sort((a, b) => b.openOrders - a.openOrders);`,
  },
  {
    id: 'tools',
    title: 'Tools: where the revenue is, and who brings it',
    code: `// Named tools instead of raw queries: each input is checked on the host.
const [top] = await tools.revenueByRegion({ status: 'shipped' });
const customers = await tools.topCustomers({ limit: 3, region: top.region });
const biggest = await tools.getOrder({ id: 'ord-0001' });
return { region: top.region, shippedCents: top.totalCents, customers, firstOrder: biggest?.customer };`,
  },
];
