"""The helpers a `transforms/<id>.py` module may call inside transform(df) (`hakiri compile`).

context_table(name)   the context store's table `name`, to join with:
                      df.join(context_table("customers"), "customer_id", "left")
"""

from hakiri.spark.compile.authoring import context_table

__all__ = ["context_table"]
