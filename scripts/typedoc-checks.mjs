// A typedoc plugin for what typedoc itself does not check: every page has a name, and every
// field of an exported interface, type or class has a doc comment (what a user sees on hover).
// typedoc names each entry of a package with subpath exports after its export key, so the `.`
// entry gets an empty title unless its file says `@module <name>`. typedoc's own `notDocumented`
// check would also flag the members of the types zod derives for each schema constant, which
// nobody documents; this one skips anything inside a variable's type.
import { Application, ReflectionKind } from 'typedoc';

/** Kinds of reflections that get a page (or a heading) of their own. */
const pageKinds =
  ReflectionKind.SomeModule |
  ReflectionKind.Class |
  ReflectionKind.Interface |
  ReflectionKind.TypeAlias |
  ReflectionKind.Function |
  ReflectionKind.Variable |
  ReflectionKind.Enum;

/** Members a user reads on hover. */
const fieldKinds = ReflectionKind.Property | ReflectionKind.Method | ReflectionKind.Accessor;

/** Members inside these belong to a value's derived type (a zod schema, an `as const` table). */
const derivedTypeOwners = ReflectionKind.Variable | ReflectionKind.SomeSignature;

/** @param {import('typedoc').Reflection} reflection */
function isDerived(reflection) {
  for (let parent = reflection.parent; parent !== undefined; parent = parent.parent) {
    if (parent.kindOf(derivedTypeOwners)) return true;
  }
  return false;
}

/** @param {import('typedoc').DeclarationReflection} field */
function isDocumented(field) {
  if (field.hasComment()) return true;
  const signatures = [
    ...(field.signatures ?? []),
    ...(field.getSignature === undefined ? [] : [field.getSignature]),
    ...(field.setSignature === undefined ? [] : [field.setSignature]),
  ];
  return signatures.some((signature) => signature.hasComment());
}

/** @param {Application} app */
export function load(app) {
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    // In packages mode each package is converted and checked with its own options, then the
    // merged project is checked under the root's (`packages`): check each reflection once.
    if (app.options.getValue('entryPointStrategy') === 'packages') return;
    for (const reflection of Object.values(project.reflections)) {
      if (!reflection.kindOf(pageKinds) || reflection.name.trim() !== '') continue;
      const kind = ReflectionKind.singularString(reflection.kind);
      const parent = reflection.parent?.getFullName() ?? project.name;
      app.logger.error(
        `A ${kind} in ${parent} has no name: give its entry file a \`@module <name>\` comment`,
      );
    }
    for (const field of project.getReflectionsByKind(fieldKinds)) {
      if (isDerived(field) || isDocumented(field) || field.flags.isExternal) continue;
      app.logger.warn(`${field.getFriendlyFullName()} has no doc comment`);
    }
  });
}
