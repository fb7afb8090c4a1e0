"""The package's version, in the shapes oslo.reports and --version want."""

from pbr import version as pbr_version

PACKAGE = 'openstack-scheduler'

_info = pbr_version.VersionInfo(PACKAGE)


def version_string() -> str:
    try:
        return _info.version_string()
    except Exception:  # not installed (running from a bare checkout)
        return 'unknown'


class VersionInfo:
    """What the Guru Meditation report prints in its header."""

    @staticmethod
    def vendor_string() -> str:
        return 'OpenStack-style scheduler developers'

    @staticmethod
    def product_string() -> str:
        return PACKAGE

    @staticmethod
    def version_string_with_package() -> str:
        return version_string()
