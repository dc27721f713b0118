# The lab's tests drive private Grove instances and servers of their own.
{:ok, _} = Application.ensure_all_started(:inets)
ExUnit.start()
