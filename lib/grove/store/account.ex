defmodule Grove.Store.Account do
  @moduledoc """
  A player's account as the store keeps it.

  Every field but `:id`, `:avatar` and the timestamps may be `nil`: an
  account made from a device alone has no name and no password yet.

    * `:id` - the store's integer id, never reused
    * `:name` - unique when present, compared byte for byte (so case-sensitive,
      and `"é"` composed differs from `"é"` decomposed: normalise before storing)
    * `:device_id` - an opaque binary, unique when present
    * `:password_hash`, `:password_salt` - opaque binaries, never interpreted
    * `:avatar` - a short string, `"🙂"` unless set
    * `:created_at`, `:updated_at` - unix seconds

  `inspect/1` leaves out the password hash and salt, so an account can be
  logged without leaking them.
  """

  @derive {Inspect, except: [:password_hash, :password_salt]}
  @enforce_keys [:id, :avatar, :created_at, :updated_at]
  defstruct [
    :id,
    :name,
    :device_id,
    :password_hash,
    :password_salt,
    :avatar,
    :created_at,
    :updated_at
  ]

  @type t :: %__MODULE__{
          id: pos_integer(),
          name: String.t() | nil,
          device_id: binary() | nil,
          password_hash: binary() | nil,
          password_salt: binary() | nil,
          avatar: String.t(),
          created_at: integer(),
          updated_at: integer()
        }
end
