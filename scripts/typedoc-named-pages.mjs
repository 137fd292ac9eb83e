// A typedoc plugin that fails `pnpm docs` when a page would have no name. typedoc names each
// entry of a package with subpath exports after its export key, so the `.` entry gets an empty
// title unless its file says `@module <name>`; typedoc itself does not warn about it.
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

/** @param {Application} app */
export function load(app) {
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    for (const reflection of Object.values(project.reflections)) {
      if (!reflection.kindOf(pageKinds) || reflection.name.trim() !== '') continue;
      const kind = ReflectionKind.singularString(reflection.kind);
      const parent = reflection.parent?.getFullName() ?? project.name;
      app.logger.error(
        `A ${kind} in ${parent} has no name: give its entry file a \`@module <name>\` comment`,
      );
    }
  });
}
