/** Class-validator violations as one line: `path: message; message | path: ...`. */
export function violationsText(
  violations: ReadonlyArray<{ path: string; messages: string[] }>,
): string {
  return violations
    .map((v) => `${v.path}: ${v.messages.join('; ')}`)
    .join(' | ');
}

/** A value as a message quotes it: a string as JSON (a long one cut short), else its kind. */
export function shown(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 60
      ? `${JSON.stringify(value.slice(0, 40))}... (${value.length} characters)`
      : JSON.stringify(value);
  }
  if (typeof value === 'function') return '(a function)';
  if (typeof value !== 'object' || value === null) return String(value);
  return Array.isArray(value) ? '(an array)' : '(an object)';
}
