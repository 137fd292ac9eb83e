// Which confinement family applies on this host.

/** The platforms this package tells apart. */
export type Platform = 'linux' | 'darwin' | 'win32' | 'unsupported';

/** The platform of this process. */
export function currentPlatform(): Platform {
  const platform = process.platform;
  return platform === 'linux' || platform === 'darwin' || platform === 'win32'
    ? platform
    : 'unsupported';
}
