// The host side of `dataProxy.request(params)`: what a backend would put in front of its
// database. Params come from untrusted code, so they are validated like any API input, and the
// answer is built from copies: user code never receives (or mutates) host objects.
import { type JsonObject, validate } from '@coda/sandbox-core';
import { z } from 'zod';
import { type Order, sampleOrders } from './orders.ts';

const OrdersRequestSchema = z.strictObject({
  resource: z.literal('orders'),
  where: z
    .strictObject({
      region: z.enum(['EMEA', 'AMER', 'APAC']).optional(),
      status: z.enum(['open', 'shipped', 'cancelled']).optional(),
      customer: z.string().max(64).optional(),
    })
    .optional(),
  page: z.number().int().min(1).max(1_000).optional(),
  pageSize: z.number().int().min(1).max(100).optional(),
});

const CustomersRequestSchema = z.strictObject({ resource: z.literal('customers') });

/** Every request a snippet may make: one resource per call, paged. */
export const DataRequestSchema = z.discriminatedUnion('resource', [
  OrdersRequestSchema,
  CustomersRequestSchema,
]);

/** A validated data request. */
export type DataRequest = z.infer<typeof DataRequestSchema>;

const defaultPageSize = 50;

/**
 * Answers one `dataProxy.request(params)` call from the sample data. Throws a
 * `SandboxValidationError` naming each bad field when `params` is not a {@link DataRequest}.
 */
export function answerDataRequest(params: unknown): JsonObject {
  const request = validate(DataRequestSchema, params, 'data request');
  if (request.resource === 'customers') {
    const customers = [...new Set(sampleOrders.map((order) => order.customer))].sort();
    return { items: customers, total: customers.length };
  }
  const { where = {}, page = 1, pageSize = defaultPageSize } = request;
  const matching = sampleOrders.filter(
    (order) =>
      (where.region === undefined || order.region === where.region) &&
      (where.status === undefined || order.status === where.status) &&
      (where.customer === undefined || order.customer === where.customer),
  );
  const items = matching.slice((page - 1) * pageSize, page * pageSize).map(toJson);
  return {
    items,
    page,
    pages: Math.max(1, Math.ceil(matching.length / pageSize)),
    total: matching.length,
  };
}

function toJson(order: Readonly<Order>): JsonObject {
  return { ...order };
}
