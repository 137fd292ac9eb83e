/** A value that survives `JSON.stringify` / `JSON.parse` unchanged: what may cross a sandbox boundary. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/** A JSON object: the shape of error details and event data. */
export type JsonObject = { [key: string]: JsonValue };
