"""The PostgreSQL side: databases the harness creates (and only those it drops), and counters."""
import subprocess

from .util import run


class Pg:
    def __init__(self, url):
        # url: postgres://user@host:port/db; admin statements go to that database.
        self.url = url
        self.base = url.rsplit("/", 1)[0]
        self.created = []

    def sql(self, statement, db_url=None):
        out = run(["psql", db_url or self.url, "-v", "ON_ERROR_STOP=1", "-Atqc", statement])
        return out.strip()

    def db_url(self, name):
        return f"{self.base}/{name}"

    def create_db(self, name):
        self.sql(f"DROP DATABASE IF EXISTS {name}")
        self.sql(f"CREATE DATABASE {name}")
        self.created.append(name)
        return self.db_url(name)

    def drop_created(self):
        for name in reversed(self.created):
            subprocess.run(["psql", self.url, "-Atqc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)
        self.created = []

    def xact_commit(self, db_name):
        """Committed transactions of one database so far (read from another database, so the
        reading itself is not counted)."""
        return int(self.sql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{db_name}'"))

    def setting(self, name):
        return self.sql(f"SHOW {name}")
