// Named tools over the sample order book: what a backend offers a model as `tools.NAME(input)`
// besides the generic `dataProxy.request`. Each input is a zod schema, checked on the host before
// the handler runs, and the source of the TypeScript the playground (and a prompt) shows.
import { defineTool, type ToolSet } from '@coda/sandbox-isolate';
import { z } from 'zod';
import { type Order, sampleOrders } from './orders.ts';

const region = z.enum(['EMEA', 'AMER', 'APAC']);
const status = z.enum(['open', 'shipped', 'cancelled']);

/** A copy, so user code never receives (or mutates) the frozen sample objects. */
const copy = (order: Readonly<Order>): Order => ({ ...order });

/** The demo engine's tools. */
export const orderTools: ToolSet = {
  getOrder: defineTool({
    description: 'One order by id (such as "ord-0042"), or null when there is none.',
    input: z.strictObject({ id: z.string().max(16).describe('The order id, "ord-" and 4 digits') }),
    handler: ({ id }) => {
      const order = sampleOrders.find((candidate) => candidate.id === id);
      return order === undefined ? null : copy(order);
    },
  }),
  revenueByRegion: defineTool({
    description: 'Order value per region in cents, largest first; all statuses unless given.',
    input: z.strictObject({ status: status.optional() }),
    handler: ({ status: wanted }) => {
      const cents = new Map<string, number>();
      for (const order of sampleOrders) {
        if (wanted !== undefined && order.status !== wanted) continue;
        cents.set(order.region, (cents.get(order.region) ?? 0) + order.totalCents);
      }
      return [...cents]
        .map(([name, totalCents]) => ({ region: name, totalCents }))
        .sort((a, b) => b.totalCents - a.totalCents);
    },
  }),
  topCustomers: defineTool({
    description: 'The customers with the largest order value, optionally in one region.',
    input: z.strictObject({
      limit: z.number().int().min(1).max(8).describe('How many customers, 1 to 8'),
      region: region.optional(),
    }),
    handler: ({ limit, region: wanted }) => {
      const cents = new Map<string, number>();
      for (const order of sampleOrders) {
        if (wanted !== undefined && order.region !== wanted) continue;
        cents.set(order.customer, (cents.get(order.customer) ?? 0) + order.totalCents);
      }
      return [...cents]
        .map(([customer, totalCents]) => ({ customer, totalCents }))
        .sort((a, b) => b.totalCents - a.totalCents)
        .slice(0, limit);
    },
  }),
};
