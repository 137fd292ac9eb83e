// Quoting for the few shell words this package generates itself (cgroup paths, profile params).

/** `value` as one POSIX shell word. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}
