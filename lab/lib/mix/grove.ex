defmodule Mix.Grove do
  @moduledoc false
  # What Grove's Mix tasks share.

  @doc """
  Parses a task's command line against its switches, or stops the task
  naming what it did not understand and where its help is.
  """
  @spec parse!([String.t()], keyword(), String.t()) :: keyword()
  def parse!(args, switches, task) do
    case OptionParser.parse(args, strict: switches) do
      {opts, [], []} ->
        opts

      {_opts, rest, invalid} ->
        given =
          rest ++
            Enum.map(invalid, fn {name, value} -> if value, do: "#{name}=#{value}", else: name end)

        Mix.raise("unexpected arguments: #{Enum.join(given, " ")}; see `mix help #{task}`")
    end
  end
end
